import { presentWith, topic, variable } from './declare';
import { bool, duration, int, oneOf, size, text, url } from './kinds';

/** Objects (files and outputs): S3-compatible or a local directory. */
export const storage = topic(
  'Storage',
  {
    storage: {
      /** S3-compatible store when a bucket is set; otherwise the local directory DATA_DIR/objects. */
      s3: presentWith('S3_BUCKET', {
        endpoint: variable('S3_ENDPOINT', url(['http:', 'https:']), {
          unset: null,
          defaultDoc: 'AWS',
          doc: 'S3-compatible endpoint (`http://minio:9000`)',
        }),
        bucket: variable('S3_BUCKET', text(), {
          unset: '',
          doc: 'store objects in this S3 bucket; unset: the local directory `DATA_DIR/objects`',
        }),
        region: variable('S3_REGION', text(), { default: 'us-east-1', doc: 'region' }),
        accessKeyId: variable('S3_ACCESS_KEY_ID', text(), {
          unset: null,
          defaultDoc: 'default AWS chain',
          doc: 'static credentials, with `S3_SECRET_ACCESS_KEY`',
        }),
        secretAccessKey: variable('S3_SECRET_ACCESS_KEY', text(), {
          unset: null,
          defaultDoc: 'default AWS chain',
          doc: 'static credentials, with `S3_ACCESS_KEY_ID`',
        }),
        forcePathStyle: variable('S3_FORCE_PATH_STYLE', bool(), {
          default: (ctx) => String(ctx.raw('S3_ENDPOINT') !== undefined),
          defaultDoc: '`true` with `S3_ENDPOINT`, else `false`',
          doc: 'path-style bucket addressing',
        }),
      }),
      maxUploadBytes: variable('MAX_UPLOAD_BYTES', size(), { default: '5gb', doc: 'the largest file' }),
      maxOutputBytes: variable('MAX_OUTPUT_BYTES', size(), { default: '1gb', doc: 'the largest generated output' }),
      incomingMaxAgeMs: variable(
        'INCOMING_UPLOAD_MAX_AGE',
        duration({ min: 60_000, reason: 'must be at least 1m (longer than any upload, e.g. 24h)' }),
        {
          default: '24h',
          doc: 'partial upload files (from a crash) older than this are removed from `DATA_DIR/objects/.incoming`; keep it above your longest upload',
        },
      ),
      incomingSweepIntervalMs: variable(
        'INCOMING_UPLOAD_SWEEP_INTERVAL',
        duration({ min: 1000, max: 2 ** 31 - 1, reason: 'must be a duration from 1s to 24d' }),
        { default: '1h', doc: 'how often each instance sweeps them (also at start)' },
      ),
    },
    signedUrlTtlSeconds: variable('SIGNED_URL_TTL_SECONDS', int(10, 86_400), {
      default: '300',
      doc: 'lifetime of upload and content URLs',
    }),
  },
  {
    's3-credentials-in-pairs': {
      variables: ['S3_ACCESS_KEY_ID', 'S3_SECRET_ACCESS_KEY'],
      requires: 'set both S3_ACCESS_KEY_ID and S3_SECRET_ACCESS_KEY, or neither (to use the default AWS credential chain)',
      broken: ({ storage }) => storage.s3 !== null && (storage.s3.accessKeyId === null) !== (storage.s3.secretAccessKey === null),
    },
  },
);

/** Text extraction and embeddings of the knowledge base (src/areas/knowledge). */
export const knowledge = topic(
  'Knowledge',
  {
    ingestMaxBytes: variable('INGEST_MAX_BYTES', size(), { default: '64mb', doc: 'the largest document text is extracted from' }),
    embeddings: {
      provider: variable('EMBEDDINGS_PROVIDER', oneOf(['builtin-hashing', 'http']), {
        default: 'builtin-hashing',
        doc: '`http`: an OpenAI-compatible `/embeddings` API',
      }),
      baseUrl: variable('EMBEDDINGS_BASE_URL', url(['http:', 'https:']), { unset: null, doc: 'the `http` provider' }),
      apiKey: variable('EMBEDDINGS_API_KEY', text(), { unset: null, doc: "the `http` provider's key" }),
      model: variable('EMBEDDINGS_MODEL', text(), { default: 'text-embedding-3-small', doc: "the `http` provider's model" }),
      dimensions: variable('EMBEDDINGS_DIMENSIONS', int(1, 16_000), {
        unset: null,
        defaultDoc: 'learned',
        doc: "the vector size asked for and checked; unset, the size of the provider's first answer is learned (the built-in embedder: 256). Changing it, or `EMBEDDINGS_MODEL`, re-embeds every record in the background",
      }),
      queryTimeoutMs: variable('EMBEDDINGS_QUERY_TIMEOUT_MS', int(100, 60_000), {
        default: '5000',
        doc: "how long a search waits for its query's embedding before answering lexically (the deployment's embedder and users' own embeddings models alike; an indexing batch through a user's connection may take `CHAT_TIMEOUT_MS`)",
      }),
      indexIntervalMs: variable('KNOWLEDGE_INDEX_INTERVAL_MS', int(100, 3_600_000), {
        default: '2000',
        doc: 'how often new and changed records are embedded',
      }),
      indexMaxBackoffMs: variable('KNOWLEDGE_INDEX_MAX_BACKOFF_MS', int(100, 86_400_000), {
        default: '300000',
        doc: "while indexing fails, the wait doubles from the interval up to this, and resets after a success; a user's failing embeddings connection ([knowledge](areas/knowledge.md)) waits the same way, alone",
      }),
    },
  },
  {
    'http-embeddings-need-a-base-url': {
      variables: ['EMBEDDINGS_PROVIDER', 'EMBEDDINGS_BASE_URL'],
      requires: 'EMBEDDINGS_PROVIDER=http needs EMBEDDINGS_BASE_URL (an OpenAI-compatible API)',
      broken: ({ embeddings }) => embeddings.provider === 'http' && !embeddings.baseUrl,
    },
  },
);
