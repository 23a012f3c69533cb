import { encodeWav } from '../../src/platform/ai/development-files';
import { decodeDevelopmentSpeech, developmentSpeech } from '../../src/platform/ai/development-speech';
import { audioType, imageType } from '../../src/platform/ai/media';
import { silentMp3 } from '../helpers/media-server';

describe('development speech', () => {
  test('decodes back exactly what it encoded, any Unicode text', () => {
    for (const text of [
      'a',
      'Hello, world.',
      'ünïcödé — 日本語 — 🙂🚀',
      'x'.repeat(300),
      String.fromCharCode(...Array.from({ length: 95 }, (_, i) => 32 + i)),
    ]) {
      const decoded = decodeDevelopmentSpeech(developmentSpeech(text));
      expect(decoded?.text).toBe(text);
      expect(decoded?.secondsAt(0)).toBe(0.16);
    }
  });

  test('refuses audio it did not make, or that was changed', () => {
    expect(decodeDevelopmentSpeech(encodeWav(Int16Array.from({ length: 8000 }, (_, i) => Math.round(9000 * Math.sin(i / 4)))))).toBeNull();
    expect(decodeDevelopmentSpeech(silentMp3())).toBeNull();
    const changed = developmentSpeech('Pay 100 euros');
    // One symbol of the text silenced: the audio no longer reads as the development speech.
    changed.fill(0, 44 + (8 + 4) * 2 * 80 * 2, 44 + (8 + 4) * 2 * 80 * 2 + 160);
    expect(decodeDevelopmentSpeech(changed)).toBeNull();
    expect(decodeDevelopmentSpeech(Buffer.from('RIFF'))).toBeNull();
  });
});

describe('media types by their bytes', () => {
  test('audio and images are recognised by their signatures, anything else is neither', () => {
    const at4 = (text: string) => Buffer.concat([Buffer.from([0, 0, 0, 0x20]), Buffer.from(text, 'latin1')]);
    expect(audioType(developmentSpeech('x'))).toBe('audio/wav');
    expect(audioType(silentMp3())).toBe('audio/mpeg');
    expect(audioType(Buffer.from([0xff, 0xfb, 0x90, 0x64]))).toBe('audio/mpeg');
    expect(audioType(Buffer.from('OggS\0\x02', 'latin1'))).toBe('audio/ogg');
    expect(audioType(Buffer.from('fLaC\0\0', 'latin1'))).toBe('audio/flac');
    expect(audioType(Buffer.from([0x1a, 0x45, 0xdf, 0xa3, 1]))).toBe('audio/webm');
    expect(audioType(at4('ftypM4A '))).toBe('audio/mp4');
    expect(audioType(Buffer.from([0xff, 0xf1, 0x50, 0x80]))).toBe('audio/aac');
    for (const other of [
      Buffer.from('plain words'),
      Buffer.from('{"json":true}'),
      Buffer.alloc(0),
      Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    ]) {
      expect(audioType(other)).toBeNull();
    }
    expect(imageType(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]))).toBe('image/png');
    expect(imageType(Buffer.from([0xff, 0xd8, 0xff, 0xe0]))).toBe('image/jpeg');
    expect(imageType(Buffer.from('GIF89a', 'latin1'))).toBe('image/gif');
    expect(imageType(Buffer.from('RIFF\0\0\0\0WEBPVP8 ', 'latin1'))).toBe('image/webp');
    expect(imageType(developmentSpeech('x'))).toBeNull();
  });
});
