import { DEVELOPMENT_PROVIDER } from './development-files';
import { DEVELOPMENT_IMAGE_MODEL, developmentImageModel } from './development-image';
import {
  DEVELOPMENT_SPEECH_MODEL,
  DEVELOPMENT_TRANSCRIPTION_MODEL,
  developmentSpeechModel,
  developmentTranscriptionModel,
} from './development-speech';
import type { MediaModelInfo, MediaModels } from './media';

/**
 * The development provider's media models: real files, made offline and deterministically, that
 * say they are the development provider's. Images are PNGs whose pattern follows from the prompt
 * (and the input image of an edit, development-image.ts); speech is a WAV whose tones encode the
 * text; transcription decodes exactly the audio that speech made, and says so of any other audio
 * (development-speech.ts).
 */
/** The development provider's media models, free of charge. */
export class DevelopmentMediaModels implements MediaModels {
  readonly models: readonly MediaModelInfo[] = [
    {
      id: DEVELOPMENT_IMAGE_MODEL,
      providerId: DEVELOPMENT_PROVIDER,
      name: 'Development image model (deterministic PNG, not an AI)',
      kind: 'image',
      microCentsPerUnit: 0,
    },
    {
      id: DEVELOPMENT_TRANSCRIPTION_MODEL,
      providerId: DEVELOPMENT_PROVIDER,
      name: 'Development transcription model (decodes development speech, not an AI)',
      kind: 'transcription',
      microCentsPerUnit: 0,
    },
    {
      id: DEVELOPMENT_SPEECH_MODEL,
      providerId: DEVELOPMENT_PROVIDER,
      name: 'Development speech model (text as tones in a WAV, not an AI)',
      kind: 'speech',
      microCentsPerUnit: 0,
    },
  ];

  private known(id: string, wanted: string): void {
    if (id !== wanted) throw new Error(`the development provider has no model ${id}`);
  }

  async image(id: string) {
    this.known(id, DEVELOPMENT_IMAGE_MODEL);
    return developmentImageModel();
  }

  async transcription(id: string) {
    this.known(id, DEVELOPMENT_TRANSCRIPTION_MODEL);
    return developmentTranscriptionModel();
  }

  async speech(id: string) {
    this.known(id, DEVELOPMENT_SPEECH_MODEL);
    return developmentSpeechModel();
  }
}
