import type { HandlerMap } from '../../http/handler';
import type { MediaService } from './service';
import { presentImages, presentSpeech, presentTranscription } from './presenter';

export function mediaHandlers(media: MediaService): Pick<HandlerMap, 'generateImages' | 'createTranscription' | 'createSpeech'> {
  return {
    generateImages: async ({ caller, body }) => presentImages(await media.images(caller.userId, body)),
    createTranscription: async ({ caller, body }) => presentTranscription(await media.transcription(caller.userId, body)),
    createSpeech: async ({ caller, body }) => presentSpeech(await media.speech(caller.userId, body)),
  };
}
