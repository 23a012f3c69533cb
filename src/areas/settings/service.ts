import type { Selectable } from 'kysely';
import type { components } from '../../../generated/api';
import type { UserSettings as SettingsRow } from '../../../generated/db';
import { type ErrorDetail, errors } from '../../platform/errors';
import type { Database } from '../../platform/db';
import * as repo from './repository';

type Schemas = components['schemas'];
export type ToolApproval = Schemas['ToolApproval'];
export type Theme = Schemas['Theme'];
export type SettingsField = Schemas['SettingsField'];
export type SettingsChanges = Schemas['SettingsUpdateRequest'];

/** The kinds a user chooses a default model for. */
export type DefaultModelKind = 'chat' | 'image' | 'transcription' | 'speech' | 'embeddings';
export type DefaultModels = Partial<Record<DefaultModelKind, string>>;

/**
 * The models a user can use, each with its kinds (`chat`, `image`…): the deployment's and the
 * user's own connections'. The models area's catalogue fits it.
 */
export interface ModelCatalog {
  available(userId: string): Promise<Array<{ modelId: string; kinds: string[]; connectionId: string | null }>>;
}

/** A user's settings, every typed field resolved (the user's value or the default; `inherited` lists the defaults). */
export type UserSettings = Omit<Schemas['Settings'], 'ui' | 'updatedAt'> & { ui: Record<string, unknown>; updatedAt: Date | null };

/** What a setting the user never chose (or reset) is: the deployment's defaults. */
export type SettingsDefaults = Pick<
  UserSettings,
  'memoryInChat' | 'knowledgeInChat' | 'toolApproval' | 'locale' | 'timeZone' | 'theme' | 'autoTitles'
> & {
  /** The deployment's default model of each kind it has one for. */
  models: DefaultModels;
};

export const BUILT_IN_DEFAULTS: Omit<SettingsDefaults, 'models'> = {
  memoryInChat: true,
  knowledgeInChat: false,
  toolApproval: 'ask_for_changes',
  locale: 'en-US',
  timeZone: 'UTC',
  theme: 'system',
  autoTitles: true,
};

/** The largest `ui` object, as JSON. */
export const MAX_UI_BYTES = 16 * 1024;

/** Each default-model field with its column and its kind. */
const MODEL_FIELDS = [
  { field: 'defaultChatModel', column: 'default_chat_model', kind: 'chat' },
  { field: 'defaultImageModel', column: 'default_image_model', kind: 'image' },
  { field: 'defaultTranscriptionModel', column: 'default_transcription_model', kind: 'transcription' },
  { field: 'defaultSpeechModel', column: 'default_speech_model', kind: 'speech' },
  // Only a model of the user's own connections: null is the deployment's embedder, which /models does not list.
  { field: 'defaultEmbeddingsModel', column: 'default_embeddings_model', kind: 'embeddings' },
] as const;

/** Each other typed field with its column. */
const VALUE_FIELDS = [
  { field: 'memoryInChat', column: 'memory_in_chat' },
  { field: 'knowledgeInChat', column: 'knowledge_in_chat' },
  { field: 'toolApproval', column: 'tool_approval' },
  { field: 'locale', column: 'locale' },
  { field: 'timeZone', column: 'time_zone' },
  { field: 'theme', column: 'theme' },
  { field: 'autoTitles', column: 'auto_titles' },
] as const;

/** The canonical form of a BCP 47 tag (`en-gb` → `en-GB`), or null when it is not well-formed. */
export function canonicalLocale(tag: string): string | null {
  try {
    return Intl.getCanonicalLocales(tag)[0] ?? null;
  } catch {
    return null;
  }
}

/** The canonical IANA name of a time zone the runtime knows (`europe/berlin` → `Europe/Berlin`), or null. */
export function canonicalTimeZone(name: string): string | null {
  try {
    return new Intl.DateTimeFormat('en-US', { timeZone: name }).resolvedOptions().timeZone;
  } catch {
    return null;
  }
}

/**
 * Users' preferences, stored per user; a field a user never set (or reset with null) follows the
 * deployment's default. Default models are checked against the models the user can use.
 */
export class SettingsService {
  private readonly db: Database;
  private readonly catalog: ModelCatalog;
  private readonly defaults: SettingsDefaults;
  /** Reads under way, by user (see `get`). */
  private readonly reading = new Map<string, Promise<UserSettings>>();

  constructor(deps: { db: Database; catalog: ModelCatalog; defaults: SettingsDefaults }) {
    this.db = deps.db;
    this.catalog = deps.catalog;
    this.defaults = deps.defaults;
  }

  /**
   * The caller's settings. Reads for one user that overlap share one query: a chat turn asks for
   * them from several places at once (its model, knowledge grounding, tool approvals).
   */
  get(userId: string): Promise<UserSettings> {
    const inFlight = this.reading.get(userId);
    if (inFlight) return inFlight;
    const read = repo
      .findSettings(this.db, userId)
      .then((row) => this.resolve(row))
      .finally(() => {
        if (this.reading.get(userId) === read) this.reading.delete(userId);
      });
    this.reading.set(userId, read);
    return read;
  }

  /**
   * Changes the fields present in `changes` (null resets a typed field, empties `ui`). Every
   * field is checked before anything is written: a bad one is `400` naming it, nothing changed.
   */
  async update(userId: string, changes: SettingsChanges): Promise<UserSettings> {
    const problems: ErrorDetail[] = [];
    const row: Record<string, unknown> = {};
    const chosenModels = MODEL_FIELDS.filter(({ field }) => typeof changes[field] === 'string');
    const available = chosenModels.length > 0 ? await this.catalog.available(userId) : [];
    for (const { field, column, kind } of MODEL_FIELDS) {
      const value = changes[field];
      if (value === undefined) continue;
      if (
        value !== null &&
        !available.some((m) => m.modelId === value && m.kinds.includes(kind) && (kind !== 'embeddings' || m.connectionId !== null))
      ) {
        problems.push({
          path: `/body/${field}`,
          message:
            kind === 'embeddings'
              ? 'must be an embeddings model of one of your model provider connections (GET /api/v1/models, kind embeddings), or null'
              : `must be a ${kind} model you can use (GET /api/v1/models)`,
        });
      }
      row[column] = value;
    }
    for (const { field, column } of VALUE_FIELDS) {
      if (changes[field] !== undefined) row[column] = changes[field];
    }
    if (typeof changes.locale === 'string') {
      row.locale = canonicalLocale(changes.locale);
      if (row.locale === null) problems.push({ path: '/body/locale', message: 'must be a well-formed BCP 47 language tag, such as en-GB' });
    }
    if (typeof changes.timeZone === 'string') {
      row.time_zone = canonicalTimeZone(changes.timeZone);
      if (row.time_zone === null)
        problems.push({ path: '/body/timeZone', message: 'must be an IANA time zone name, such as Europe/Berlin' });
    }
    if (changes.ui !== undefined) {
      const json = JSON.stringify(changes.ui ?? {});
      if (Buffer.byteLength(json) > MAX_UI_BYTES)
        problems.push({ path: '/body/ui', message: `must be at most ${MAX_UI_BYTES} bytes as JSON` });
      row.ui = json;
    }
    if (problems.length > 0) throw errors.invalidRequest('Some settings are not valid; nothing was changed.', problems);
    const stored = await repo.upsertSettings(this.db, userId, { ...row, updated_at: new Date() });
    // A read that began before this write must not answer a later `get`.
    this.reading.delete(userId);
    return this.resolve(stored);
  }

  /** The model each kind uses when a request names none: the user's choice, else the deployment's default. */
  async defaultModels(userId: string): Promise<DefaultModels> {
    const settings = await this.get(userId);
    const models: DefaultModels = {};
    for (const { field, kind } of MODEL_FIELDS) {
      const id = settings[field];
      if (id !== null) models[kind] = id;
    }
    return models;
  }

  /** Whether the user chose a default model of any kind but embeddings (onboarding's `model` step). */
  async hasChosenModel(userId: string): Promise<boolean> {
    const row = await repo.findSettings(this.db, userId);
    return MODEL_FIELDS.some(({ column, kind }) => kind !== 'embeddings' && row?.[column] != null);
  }

  /** The user's chosen embeddings model (one of their connections'), or null for the deployment's embedder. */
  async embeddingsModel(userId: string): Promise<string | null> {
    return (await repo.findSettings(this.db, userId))?.default_embeddings_model ?? null;
  }

  private resolve(row: Selectable<SettingsRow> | undefined): UserSettings {
    const inherited: SettingsField[] = [];
    const pick = <T>(field: SettingsField, stored: T | null | undefined, fallback: T): T => {
      if (stored === null || stored === undefined) {
        inherited.push(field);
        return fallback;
      }
      return stored;
    };
    const d = this.defaults;
    return {
      defaultChatModel: pick('defaultChatModel', row?.default_chat_model, d.models.chat ?? null),
      defaultImageModel: pick('defaultImageModel', row?.default_image_model, d.models.image ?? null),
      defaultTranscriptionModel: pick('defaultTranscriptionModel', row?.default_transcription_model, d.models.transcription ?? null),
      defaultSpeechModel: pick('defaultSpeechModel', row?.default_speech_model, d.models.speech ?? null),
      defaultEmbeddingsModel: pick('defaultEmbeddingsModel', row?.default_embeddings_model, null),
      memoryInChat: pick('memoryInChat', row?.memory_in_chat, d.memoryInChat),
      knowledgeInChat: pick('knowledgeInChat', row?.knowledge_in_chat, d.knowledgeInChat),
      toolApproval: pick('toolApproval', row?.tool_approval as ToolApproval | null | undefined, d.toolApproval),
      locale: pick('locale', row?.locale, d.locale),
      timeZone: pick('timeZone', row?.time_zone, d.timeZone),
      theme: pick('theme', row?.theme as Theme | null | undefined, d.theme),
      autoTitles: pick('autoTitles', row?.auto_titles, d.autoTitles),
      ui: (row?.ui ?? {}) as Record<string, unknown>,
      inherited,
      updatedAt: row?.updated_at ?? null,
    };
  }
}
