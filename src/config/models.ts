import type { MediaModelPrice } from '../platform/ai/media';
import { type Context, topic, variable } from './declare';
import { duration, entries, int, oneOf, parsed, size, text, url } from './kinds';

export interface ModelPrice {
  id: string;
  inputCentsPerMillionTokens: number;
  outputCentsPerMillionTokens: number;
}

/**
 * MODEL_PROVIDER_MODELS: model ids, each optionally followed by `:input:output` prices in cents
 * per million tokens. Ids are opaque and may contain `:` and `/` (`llama3.1:8b`,
 * `meta-llama/Llama-3.1-8B`): an entry has prices exactly when its last two `:`-separated parts
 * are whole numbers, so `qwen2.5:7b` is an id, `gpt-4o-mini:15:60` an id with prices, and an id
 * that itself ends in two numbers is written with its prices (`model:1:2:0:0`).
 */
const modelList = parsed('comma-separated `id` or `id:in:out`', (value, problem) =>
  entries(value).map((entry): ModelPrice => {
    const priced = /^(.+):(\d{1,9}):(\d{1,9})$/.exec(entry);
    const id = priced ? (priced[1] as string) : entry;
    if (id.length > 200 || /\s/.test(id) || /^:|:$/.test(id))
      problem(`entries are model ids (which may contain : and /), optionally with prices: gpt-4o-mini:15:60 (got "${entry}")`);
    return { id, inputCentsPerMillionTokens: Number(priced?.[2] ?? 0), outputCentsPerMillionTokens: Number(priced?.[3] ?? 0) };
  }),
);

const MEDIA_PRICE = /^(.+)=(\d{1,9}(?:\.\d{1,6})?)$/;

/**
 * A MODEL_PROVIDER_IMAGE_MODELS (…_TRANSCRIPTION_…, …_SPEECH_…) list: model ids, each optionally
 * with its price in cents per unit after `=` (`dall-e-3=4`: 4 cents an image; `whisper-1=0.01`:
 * a hundredth of a cent a second; `tts-1=0.0015`: per character), at most six decimals.
 */
const mediaModels = parsed('comma-separated `id` or `id=cents`', (value, problem) =>
  entries(value).map((entry): MediaModelPrice => {
    const priced = MEDIA_PRICE.exec(entry);
    const id = priced ? (priced[1] as string) : entry;
    if (id.length > 200 || /\s|=/.test(id))
      problem(`entries are model ids, optionally with a price in cents per unit: dall-e-3=4 (got "${entry}")`);
    const [whole, fraction = ''] = (priced?.[2] ?? '0').split('.');
    return { id, microCentsPerUnit: Number(whole) * 1_000_000 + Number(fraction.padEnd(6, '0')) };
  }),
);

/** Production without a base URL must ask for the development model by name. */
const productionWithoutProvider = (baseUrl: string | null, ctx: Context) =>
  ctx.env === 'production' && !baseUrl && ctx.raw('MODEL_PROVIDER') === undefined;

/** The model provider of the deployment, chat replies, and generated media (src/areas/media). */
export const models = topic(
  'Models and chat',
  {
    models: {
      baseUrl: variable('MODEL_PROVIDER_BASE_URL', url(['http:', 'https:']), {
        unset: null,
        doc: "an OpenAI-compatible API (`https://api.openai.com/v1`, vLLM's, Ollama's `/v1`, LiteLLM…)",
      }),
      apiKey: variable('MODEL_PROVIDER_API_KEY', text(), { unset: null, doc: 'its key (sent as a bearer token; never shown)' }),
      provider: variable('MODEL_PROVIDER', oneOf(['openai-compatible', 'development']), {
        default: (ctx) => (ctx.raw('MODEL_PROVIDER_BASE_URL') ? 'openai-compatible' : 'development'),
        defaultDoc: '`openai-compatible` with `MODEL_PROVIDER_BASE_URL`, else `development`',
        doc: '`openai-compatible` or `development` (the built-in model, not an AI). Production refuses to start without `MODEL_PROVIDER_BASE_URL` unless `MODEL_PROVIDER=development` is set explicitly',
      }),
      models: variable('MODEL_PROVIDER_MODELS', modelList, {
        unset: [],
        defaultDoc: 'read from the provider',
        doc: 'its models, the default first. Ids are opaque and may hold `:` and `/` (`llama3.1:8b`). Prices, in cents per million input and output tokens, follow as `:in:out` and are recognised only when the last two parts are both whole numbers (`gpt-4o-mini:15:60`; an id that itself ends in two numbers is written with its prices, `model:1:2:0:0`). Unset, the service reads `GET {base}/models` at start-up (all priced 0, the first the default) and refuses to start if it cannot',
      }),
      timeoutMs: variable('CHAT_TIMEOUT_MS', int(100, 600_000), { default: '60000', doc: 'the longest a reply may take (`504` after)' }),
      replyLeaseMs: variable('CHAT_REPLY_LEASE_MS', int(300, 600_000), {
        default: '30000',
        doc: "how long a reply being written is held without renewal (renewed every third of it); a stopped instance's replies are failed as `interrupted` after it",
      }),
      replyRecoveryIntervalMs: variable('CHAT_REPLY_RECOVERY_INTERVAL_MS', int(10, 600_000), {
        default: '10000',
        doc: 'how often each instance looks for replies whose instance stopped (also at start)',
      }),
      attachmentImageMaxBytes: variable('CHAT_ATTACHMENT_IMAGE_MAX_BYTES', size(), {
        default: '5mb',
        doc: 'the largest image a chat message may attach (`attachments`; `413` above): it is sent to the model with the message',
      }),
      attachmentTextMaxChars: variable('CHAT_ATTACHMENT_TEXT_MAX_CHARS', int(100, 1_000_000), {
        default: '20000',
        doc: "the most characters of extracted text a chat message's attached documents give the model in all (`413` above)",
      }),
      temporaryTtlMs: variable(
        'TEMPORARY_CONVERSATION_TTL',
        duration({ min: 1000, max: 365 * 86_400_000, reason: 'must be a duration from 1s to 365d' }),
        {
          default: '24h',
          doc: 'how long after its last activity (its last message or change) a temporary conversation (`temporary: true`) is deleted with its messages; its usage records stay',
        },
      ),
      temporarySweepIntervalMs: variable('TEMPORARY_CONVERSATION_SWEEP_INTERVAL_MS', int(10, 3_600_000), {
        default: '60000',
        doc: 'how often each instance deletes the temporary conversations past `TEMPORARY_CONVERSATION_TTL`',
      }),
      replyEventsRetentionMs: variable('CHAT_REPLY_EVENTS_RETENTION_MS', int(0, 86_400_000), {
        default: '300000',
        doc: "how long a reply's stored stream events are kept after it ended, for clients resuming its stream (removed by the recovery sweep)",
      }),
      connectionsPerUser: variable('MODEL_CONNECTIONS_PER_USER', int(0, 1000), {
        default: '20',
        doc: 'the most model provider connections (bring your own key) one user may have (0: none)',
      }),
      media: {
        image: variable('MODEL_PROVIDER_IMAGE_MODELS', mediaModels, {
          unset: [],
          doc: "the provider's image models ([media](areas/media.md)), reached through OpenAI's images API under `MODEL_PROVIDER_BASE_URL`; each entry an id, optionally with its price in cents per image after `=` (`gpt-image-1=4`), at most six decimals. The development provider has its own (free)",
        }),
        transcription: variable('MODEL_PROVIDER_TRANSCRIPTION_MODELS', mediaModels, {
          unset: [],
          doc: "the provider's transcription models, through OpenAI's transcriptions API; the price is per second of audio (`whisper-1=0.01`)",
        }),
        speech: variable('MODEL_PROVIDER_SPEECH_MODELS', mediaModels, {
          unset: [],
          doc: "the provider's speech models, through OpenAI's speech API; the price is per character (`tts-1=0.0015`)",
        }),
      },
    },
    media: {
      timeoutMs: variable('MEDIA_TIMEOUT_MS', int(100, 600_000), {
        default: '120000',
        doc: 'the longest a media call may take; then the model call is aborted and the answer is `504`, nothing stored or charged',
      }),
      maxAudioBytes: variable('MEDIA_MAX_AUDIO_BYTES', size(), {
        default: '25mb',
        doc: 'the largest audio file that may be transcribed (`413` above)',
      }),
      maxImageBytes: variable('MEDIA_MAX_IMAGE_BYTES', size(), {
        default: '20mb',
        doc: 'the largest image that may be edited (`413` above)',
      }),
    },
  },
  {
    'listed-models-need-a-base-url': {
      variables: ['MODEL_PROVIDER_MODELS', 'MODEL_PROVIDER_BASE_URL'],
      requires: 'MODEL_PROVIDER_MODELS needs MODEL_PROVIDER_BASE_URL (an OpenAI-compatible API)',
      broken: ({ models }) => !models.baseUrl && models.models.length > 0,
    },
    'media-models-need-a-base-url': {
      variables: [
        'MODEL_PROVIDER_IMAGE_MODELS',
        'MODEL_PROVIDER_TRANSCRIPTION_MODELS',
        'MODEL_PROVIDER_SPEECH_MODELS',
        'MODEL_PROVIDER_BASE_URL',
      ],
      requires:
        "MODEL_PROVIDER_<KIND>_MODELS needs MODEL_PROVIDER_BASE_URL (an API in OpenAI's format); the development provider has its own media models",
      broken: ({ models }) =>
        (['image', 'transcription', 'speech'] as const)
          .filter((kind) => !models.baseUrl && models.media[kind].length > 0)
          .map(
            (kind) =>
              `MODEL_PROVIDER_${kind.toUpperCase()}_MODELS needs MODEL_PROVIDER_BASE_URL (an API in OpenAI's format); the development provider has its own media models`,
          ),
    },
    'production-needs-a-model-provider': {
      variables: ['NODE_ENV', 'MODEL_PROVIDER_BASE_URL', 'MODEL_PROVIDER'],
      requires:
        'production needs a model provider: set MODEL_PROVIDER_BASE_URL (an OpenAI-compatible API), or MODEL_PROVIDER=development to serve the built-in development model (not an AI)',
      broken: ({ models }, ctx) => productionWithoutProvider(models.baseUrl, ctx),
    },
    'openai-compatible-needs-a-base-url': {
      variables: ['MODEL_PROVIDER', 'MODEL_PROVIDER_BASE_URL'],
      requires: 'MODEL_PROVIDER=openai-compatible needs MODEL_PROVIDER_BASE_URL (an OpenAI-compatible API)',
      broken: ({ models }, ctx) =>
        models.provider === 'openai-compatible' && !models.baseUrl && !productionWithoutProvider(models.baseUrl, ctx),
    },
    'development-provider-has-no-base-url': {
      variables: ['MODEL_PROVIDER', 'MODEL_PROVIDER_BASE_URL'],
      requires: 'MODEL_PROVIDER=development cannot be combined with MODEL_PROVIDER_BASE_URL',
      broken: ({ models }) => models.provider === 'development' && !!models.baseUrl,
    },
  },
);
