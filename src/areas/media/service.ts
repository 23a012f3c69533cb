import type { Transaction } from 'kysely';
import type { RequestInput } from '../../platform/api-types';
import { extensionOf, imageType, audioType, type MediaKind, type MediaUnit, UNIT_OF } from '../../platform/ai/media';
import { generateImages, MediaFailure, speak, transcribeAudio } from '../../platform/ai/media-calls';
import type { FailureLog } from '../../platform/ai/models';
import type { Database, DB } from '../../platform/db';
import { errors } from '../../platform/errors';
import { uuidv7 } from '../../platform/ids';
import type { BudgetGate, Hold } from '../billing/service';
import type { ConversationService } from '../conversations/service';
import type { FileService } from '../files/service';
import type { ModelService, ResolvedMediaModel } from '../models/service';
import type { NoteService } from '../notes/service';
import type { GeneratedOutput, OutputRow, OutputService } from '../outputs/service';
import type { ProjectService } from '../projects/service';
import type { WebhookService } from '../webhooks/service';

type ImageInput = RequestInput<'ImageGenerationRequest'>;
type TranscriptionInput = RequestInput<'TranscriptionRequest'>;
type SpeechInput = RequestInput<'SpeechRequest'>;

/** The media operations, as outputs and events name them. */
export type MediaOperation = 'image_generation' | 'image_edit' | 'transcription' | 'speech';

export interface MediaSettings {
  /** How long a media call may take (MEDIA_TIMEOUT_MS); then it is aborted and answered `504`. */
  timeoutMs: number;
  /** The largest audio file that may be transcribed (MEDIA_MAX_AUDIO_BYTES). */
  maxAudioBytes: number;
  /** The largest image that may be edited (MEDIA_MAX_IMAGE_BYTES). */
  maxImageBytes: number;
}

/** What a media call used, as answered and sent in `media.completed`. */
export interface MediaUsage {
  unit: MediaUnit;
  units: number;
  inputTokens: number;
  outputTokens: number;
  costMicroCents: number;
}

export interface MediaResult {
  generationId: string;
  model: ResolvedMediaModel;
  outputs: OutputRow[];
  usage: MediaUsage;
  warnings: string[];
}

export interface TranscriptionResult extends MediaResult {
  transcription: {
    text: string;
    language: string | null;
    durationSeconds: number | null;
    segments: Array<{ text: string; startSecond: number; endSecond: number }>;
  };
  noteId: string | null;
  fileId: string | null;
}

/** What a MediaService is built from. */
export interface MediaServiceDeps {
  db: Database;
  models: Pick<ModelService, 'resolveMedia'>;
  outputs: Pick<OutputService, 'createGenerated' | 'requireRoom'>;
  files: Pick<FileService, 'ownContent' | 'createIngested'>;
  notes: Pick<NoteService, 'create'>;
  projects: Pick<ProjectService, 'requireOwnedIfNamed'>;
  conversations: Pick<ConversationService, 'requireOwned'>;
  billing: BudgetGate;
  webhooks: Pick<WebhookService, 'emitEvent'>;
  settings: MediaSettings;
  log?: FailureLog;
}

const USAGE_KIND = { image: 'media.image', transcription: 'media.transcription', speech: 'media.speech' } as const;

/** How a call's outcome is recorded: its usage, priced per unit, and its `media.completed` event. */
interface Completion {
  userId: string;
  generationId: string;
  operation: MediaOperation;
  kind: MediaKind;
  model: ResolvedMediaModel;
  units: number;
  tokens: { inputTokens: number; outputTokens: number };
  hold: Hold | null;
}

/**
 * Generated media: images (made or edited), transcripts and speech, each call synchronous within
 * the deployment's timeout, each result an output of the caller's. A call is a charged action:
 * the budget is checked before the model is called; the outputs, the usage ledger's entry, the
 * charge and the `media.completed` event are written in one transaction after it. A provider's
 * failure stores and charges nothing and emits `media.failed`.
 */
export class MediaService {
  constructor(private readonly deps: MediaServiceDeps) {}

  /** `404` for a conversation or project that is not the caller's. */
  private async checkScope(userId: string, input: { conversationId?: string; projectId?: string }): Promise<void> {
    await this.deps.projects.requireOwnedIfNamed(userId, input.projectId);
    if (input.conversationId !== undefined) await this.deps.conversations.requireOwned(userId, input.conversationId);
  }

  /**
   * The checks every call passes before its model is called: the budget, room to store its result,
   * and (a deployment's model) the call's bound reserved against the caller's quotas: its units
   * (`units`, an upper estimate) at the model's price and the prompt's characters as tokens.
   */
  private async beforeCall(userId: string, model: ResolvedMediaModel, bound: { units: number; promptChars: number }): Promise<Hold | null> {
    await this.deps.billing.requireBudget(userId);
    await this.deps.outputs.requireRoom(userId);
    if (model.connectionId !== null) return null;
    return this.deps.billing.reserve(userId, {
      model: model.info,
      usage: { inputTokens: bound.promptChars, outputTokens: 0 },
      units: { count: bound.units, microCentsPerUnit: model.microCentsPerUnit },
    });
  }

  /** Runs the rest of a call that holds `hold`, which is released if it fails (its charge replaces it otherwise). */
  private async holding<T>(hold: Hold | null, call: () => Promise<T>): Promise<T> {
    try {
      return await call();
    } catch (error) {
      await this.deps.billing.release(hold);
      throw error;
    }
  }

  /** Runs the model call; a failure emits `media.failed` and answers `502` or `504`. */
  private async callModel<T>(
    userId: string,
    generationId: string,
    operation: MediaOperation,
    model: ResolvedMediaModel,
    run: () => Promise<T>,
  ): Promise<T> {
    try {
      return await run();
    } catch (error) {
      if (!(error instanceof MediaFailure)) throw error;
      await this.deps.db.transaction().execute(async (trx) => {
        await this.deps.webhooks.emitEvent(trx, 'media.failed', userId, {
          generationId,
          operation,
          model: model.info.id,
          connectionId: model.connectionId,
          errorCode: error.code,
          error: error.message,
        });
      });
      throw error.code === 'model_provider_timeout'
        ? errors.modelProviderTimeout(error.message, { generationId })
        : errors.modelProviderError(error.message, { generationId });
    }
  }

  /** Records the usage and charges it, and emits `media.completed`, in the outputs' transaction. */
  private async complete(trx: Transaction<DB>, rows: OutputRow[], c: Completion): Promise<MediaUsage> {
    const unit = UNIT_OF[c.kind];
    const cost = await this.deps.billing.charge(trx, {
      userId: c.userId,
      kind: USAGE_KIND[c.kind],
      resourceId: c.generationId,
      model: c.model.info,
      connectionId: c.model.connectionId,
      usage: c.tokens,
      units: { unit, count: c.units, microCentsPerUnit: c.model.microCentsPerUnit },
      at: new Date(),
      hold: c.hold,
    });
    const usage: MediaUsage = { unit, units: c.units, ...c.tokens, costMicroCents: cost };
    await this.deps.webhooks.emitEvent(trx, 'media.completed', c.userId, {
      generationId: c.generationId,
      operation: c.operation,
      model: c.model.info.id,
      connectionId: c.model.connectionId,
      outputIds: rows.map((r) => r.id),
      usage: { unit, units: c.units, inputTokens: c.tokens.inputTokens, outputTokens: c.tokens.outputTokens, costCents: cost / 1e6 },
    });
    return usage;
  }

  private settingsFor(model: ResolvedMediaModel) {
    const log = this.deps.log;
    return {
      timeoutMs: this.deps.settings.timeoutMs,
      describe: model.describe,
      // The provider's own text may echo a connection's key: the log never shows it.
      log:
        log &&
        ((message: string, meta: Record<string, unknown>) =>
          log(message, { ...meta, error: model.scrub(String(meta.error)), detail: model.scrub(String(meta.detail)) })),
    };
  }

  async images(userId: string, input: ImageInput): Promise<MediaResult> {
    if (input.size !== undefined && input.aspectRatio !== undefined) {
      throw errors.invalidRequest('Give either size or aspectRatio, not both.', [
        { path: '/body/aspectRatio', message: 'must not be given with size' },
      ]);
    }
    const model = await this.deps.models.resolveMedia(userId, input.model ?? null, 'image');
    await this.checkScope(userId, input);
    let source: { bytes: Buffer; mediaType: string; fileId: string } | undefined;
    if (input.inputFileId !== undefined) {
      const { bytes } = await this.deps.files.ownContent(userId, input.inputFileId, this.deps.settings.maxImageBytes, 'inputFileId');
      const mediaType = imageType(bytes);
      if (!mediaType) throw errors.unsupportedMediaType('The input file is not an image: PNG, JPEG, WebP and GIF images can be edited.');
      source = { bytes, mediaType, fileId: input.inputFileId };
    }
    const hold = await this.beforeCall(userId, model, { units: input.count ?? 1, promptChars: input.prompt.length });
    return this.holding(hold, async () => {
      const generationId = uuidv7();
      const operation: MediaOperation = source ? 'image_edit' : 'image_generation';
      const count = input.count ?? 1;
      const generated = await this.callModel(userId, generationId, operation, model, async () =>
        generateImages(
          await model.media.image(model.providerModelId),
          {
            prompt: input.prompt,
            count,
            size: input.size as `${number}x${number}` | undefined,
            aspectRatio: input.aspectRatio as `${number}:${number}` | undefined,
            input: source,
          },
          this.settingsFor(model),
        ),
      );
      const outputs: GeneratedOutput[] = generated.images.map((image, i) => {
        const mediaType = imageType(image.bytes) ?? image.mediaType;
        return {
          type: 'image',
          name: `image-${i + 1}.${extensionOf(mediaType)}`,
          mimeType: mediaType,
          body: image.bytes,
          origin: operation,
          generationId,
          prompt: input.prompt,
          model: model.info.id,
          connectionId: model.connectionId,
          sourceFileId: source?.fileId ?? null,
          projectId: input.projectId ?? null,
          conversationId: input.conversationId ?? null,
        };
      });
      const { rows, result: usage } = await this.deps.outputs.createGenerated(userId, outputs, (trx, rows) =>
        this.complete(trx, rows, {
          userId,
          generationId,
          operation,
          kind: 'image',
          model,
          units: rows.length,
          tokens: generated.usage,
          hold,
        }),
      );
      return { generationId, model, outputs: rows, usage, warnings: generated.warnings };
    });
  }

  async transcription(userId: string, input: TranscriptionInput): Promise<TranscriptionResult> {
    const model = await this.deps.models.resolveMedia(userId, input.model ?? null, 'transcription');
    await this.checkScope(userId, input);
    const { file, bytes } = await this.deps.files.ownContent(userId, input.fileId, this.deps.settings.maxAudioBytes);
    if (!audioType(bytes))
      throw errors.unsupportedMediaType('The file is not audio: WAV, MP3, OGG, FLAC, WebM and M4A can be transcribed.');
    // Its seconds are not known before: a second for every kilobyte of audio bounds them (no format here is denser).
    const hold = await this.beforeCall(userId, model, { units: Math.ceil(bytes.length / 1000), promptChars: 0 });
    return this.holding(hold, async () => {
      const generationId = uuidv7();
      const transcript = await this.callModel(userId, generationId, 'transcription', model, async () =>
        transcribeAudio(await model.media.transcription(model.providerModelId), bytes, input.language, this.settingsFor(model)),
      );
      const text = Buffer.from(transcript.text, 'utf8');
      const base = file.name.replace(/\.[^.]*$/, '') || 'audio';
      const output: GeneratedOutput = {
        type: 'text',
        name: `${base}-transcript.txt`,
        mimeType: 'text/plain; charset=utf-8',
        body: text,
        origin: 'transcription',
        generationId,
        prompt: null,
        model: model.info.id,
        connectionId: model.connectionId,
        sourceFileId: file.id,
        projectId: input.projectId ?? null,
        conversationId: input.conversationId ?? null,
      };
      // Priced by the seconds of audio, rounded up (0 when the model does not say how long it was).
      const seconds = Math.ceil(transcript.durationSeconds ?? 0);
      // With `ingest`, the transcript's file must fit too: its bytes are counted in the same check.
      const { rows, result: usage } = await this.deps.outputs.createGenerated(
        userId,
        [output],
        (trx, rows) =>
          this.complete(trx, rows, {
            userId,
            generationId,
            operation: 'transcription',
            kind: 'transcription',
            model,
            units: seconds,
            tokens: { inputTokens: 0, outputTokens: 0 },
            hold,
          }),
        input.ingest ? text.length : 0,
      );
      const projectId = input.projectId ?? null;
      const noteId = input.saveAsNote
        ? (
            await this.deps.notes.create(userId, {
              title: `Transcript of ${file.name}`.slice(0, 200),
              content: transcript.text,
              projectId: projectId ?? undefined,
            })
          ).id
        : null;
      const fileId = input.ingest
        ? (
            await this.deps.files.createIngested(userId, {
              name: `${base}-transcript.txt`,
              mimeType: 'text/plain',
              bytes: text,
              projectId,
              conversationId: input.conversationId ?? null,
            })
          ).id
        : null;
      return {
        generationId,
        model,
        outputs: rows,
        usage,
        warnings: transcript.warnings,
        transcription: {
          text: transcript.text,
          language: transcript.language,
          durationSeconds: transcript.durationSeconds,
          segments: transcript.segments,
        },
        noteId,
        fileId,
      };
    });
  }

  async speech(userId: string, input: SpeechInput): Promise<MediaResult> {
    const model = await this.deps.models.resolveMedia(userId, input.model ?? null, 'speech');
    await this.checkScope(userId, input);
    const hold = await this.beforeCall(userId, model, { units: [...input.text].length, promptChars: 0 });
    return this.holding(hold, async () => {
      const generationId = uuidv7();
      const audio = await this.callModel(userId, generationId, 'speech', model, async () =>
        speak(
          await model.media.speech(model.providerModelId),
          { text: input.text, voice: input.voice ?? 'alloy', format: input.format ?? 'mp3', speed: input.speed },
          this.settingsFor(model),
        ),
      );
      const output: GeneratedOutput = {
        type: 'audio',
        name: `speech.${extensionOf(audio.mediaType)}`,
        mimeType: audio.mediaType,
        body: audio.bytes,
        origin: 'speech',
        generationId,
        prompt: input.text,
        model: model.info.id,
        connectionId: model.connectionId,
        sourceFileId: null,
        projectId: input.projectId ?? null,
        conversationId: input.conversationId ?? null,
      };
      // Priced by the characters spoken (Unicode code points).
      const characters = [...input.text].length;
      const { rows, result: usage } = await this.deps.outputs.createGenerated(userId, [output], (trx, rows) =>
        this.complete(trx, rows, {
          userId,
          generationId,
          operation: 'speech',
          kind: 'speech',
          model,
          units: characters,
          tokens: { inputTokens: 0, outputTokens: 0 },
          hold,
        }),
      );
      return { generationId, model, outputs: rows, usage, warnings: audio.warnings };
    });
  }
}
