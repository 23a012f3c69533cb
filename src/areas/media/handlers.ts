import type { HandlerMap } from '../../http/handler';
import { presentOutput } from '../outputs/service';
import type { MediaResult, MediaService, MediaUsage } from './service';
import type { Schemas } from '../../platform/api-types';

function presentUsage(usage: MediaUsage): Schemas['MediaUsage'] {
  return { unit: usage.unit, units: usage.units, inputTokens: usage.inputTokens, outputTokens: usage.outputTokens, costCents: usage.costMicroCents / 1e6 };
}

/** The one output of a transcription or speech call. */
function single(result: MediaResult) {
  const [row] = result.outputs;
  if (!row) throw new Error('a media call stored no output');
  return presentOutput(row);
}

export function mediaHandlers(media: MediaService): Pick<HandlerMap, 'generateImages' | 'createTranscription' | 'createSpeech'> {
  return {
    generateImages: async ({ caller, body }) => {
      const result = await media.images(caller.userId, body);
      return {
        generationId: result.generationId,
        model: result.model.info.id,
        outputs: result.outputs.map(presentOutput),
        usage: presentUsage(result.usage),
        warnings: result.warnings,
      };
    },
    createTranscription: async ({ caller, body }) => {
      const result = await media.transcription(caller.userId, body);
      return {
        generationId: result.generationId,
        model: result.model.info.id,
        transcription: result.transcription,
        output: single(result),
        noteId: result.noteId,
        fileId: result.fileId,
        usage: presentUsage(result.usage),
        warnings: result.warnings,
      };
    },
    createSpeech: async ({ caller, body }) => {
      const result = await media.speech(caller.userId, body);
      return { generationId: result.generationId, model: result.model.info.id, output: single(result), usage: presentUsage(result.usage), warnings: result.warnings };
    },
  };
}
