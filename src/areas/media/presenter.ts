import { presentOutput } from '../outputs/service';
import type { Schemas } from '../../platform/api-types';
import type { MediaResult, MediaUsage, TranscriptionResult } from './service';

export function presentUsage(usage: MediaUsage): Schemas['MediaUsage'] {
  return {
    unit: usage.unit,
    units: usage.units,
    inputTokens: usage.inputTokens,
    outputTokens: usage.outputTokens,
    costCents: usage.costMicroCents / 1e6,
  };
}

/** What every media answer carries, around its results (in the schema's order, as the JSON writer writes it). */
function presentCall<R extends object>(result: MediaResult, results: R) {
  return {
    generationId: result.generationId,
    model: result.model.info.id,
    ...results,
    usage: presentUsage(result.usage),
    warnings: result.warnings,
  };
}

/** The one output of a transcription or speech call. */
function single(result: MediaResult) {
  const [row] = result.outputs;
  if (!row) throw new Error('a media call stored no output');
  return presentOutput(row);
}

export const presentImages = (result: MediaResult): Schemas['ImageGenerationResponse'] =>
  presentCall(result, { outputs: result.outputs.map(presentOutput) });

export const presentTranscription = (result: TranscriptionResult): Schemas['TranscriptionResponse'] =>
  presentCall(result, { transcription: result.transcription, output: single(result), noteId: result.noteId, fileId: result.fileId });

export const presentSpeech = (result: MediaResult): Schemas['SpeechResponse'] => presentCall(result, { output: single(result) });
