import path from 'node:path';
import { sealedColumns as integrationSealedColumns } from '../areas/integrations/service';
import { sealedColumns as mcpSealedColumns } from '../areas/mcp-servers/exchanges';
import { countQueuedRuns } from '../areas/automations/repository';
import { sealedColumns as modelSealedColumns } from '../areas/models/connections';
import { countPendingDeliveries } from '../areas/webhooks/repository';
import { sealedColumns as webhookSealedColumns } from '../areas/webhooks/signing';
import { ConfigError, type Config } from '../config';
import { type DatabaseHandle, openPglite, openPostgres } from '../platform/db';
import { type ModelPrice, ModelProviderFailure } from '../platform/ai/models';
import { listProviderModels } from '../platform/ai/sdk-chat';
import type { Logger } from '../platform/logger';
import { Metrics } from '../platform/metrics';
import type { ObjectStore } from '../platform/storage';
import { LocalObjectStore } from '../platform/storage/local';
import { keyFromMaterial, LEGACY_KEY_ID, loadDevSecretKey, type SealedColumn, type SecretKey, Secrets } from '../platform/secrets';

/**
 * The models to offer: MODEL_PROVIDER_MODELS, or the provider's own list (`GET {base}/models`,
 * free of charge) when only a base URL is set. A list that cannot be read stops the start.
 */
export async function resolveModels(config: Config, logger: Logger): Promise<ModelPrice[]> {
  const { baseUrl, apiKey, models } = config.models;
  if (!baseUrl) {
    if (config.env === 'production') {
      logger.warn(
        'MODEL_PROVIDER=development: serving the built-in development model, which is NOT an AI (it quotes the user). Set MODEL_PROVIDER_BASE_URL for a real model.',
      );
    }
    return [];
  }
  if (models.length > 0) return [...models];
  try {
    const ids = await listProviderModels({ baseUrl, apiKey });
    logger.info("read the model provider's model list (MODEL_PROVIDER_MODELS is not set); the first is the default, all priced 0", {
      models: ids,
    });
    return ids.map((id) => ({ id, inputCentsPerMillionTokens: 0, outputCentsPerMillionTokens: 0 }));
  } catch (error) {
    const failure = error instanceof ModelProviderFailure ? error : new ModelProviderFailure(String(error));
    throw new ConfigError([
      `MODEL_PROVIDER_MODELS is not set and the model list of MODEL_PROVIDER_BASE_URL (GET ${baseUrl.replace(/\/$/, '')}/models) could not be read: ${failure.message} (${failure.detail}). ` +
        'Set MODEL_PROVIDER_MODELS to the model ids it offers, the default first.',
    ]);
  }
}

/** S3 when a bucket is configured, otherwise a directory under DATA_DIR. */
export function openObjectStore(config: Config): ObjectStore {
  if (!config.storage.s3) return new LocalObjectStore(path.join(config.dataDir, 'objects'));
  // Loaded only when used, like the payment provider's library and the embedded database: the AWS
  // SDK is large, and an instance that stores objects locally never needs it.
  const { S3ObjectStore } = require('../platform/storage/s3') as typeof import('../platform/storage/s3');
  return new S3ObjectStore(config.storage.s3);
}

/** Every column holding sealed secrets, for key rotation (each area that stores secrets adds its own). */
export const SEALED_COLUMNS: readonly SealedColumn[] = [
  ...webhookSealedColumns,
  ...modelSealedColumns,
  ...mcpSealedColumns,
  ...integrationSealedColumns,
];

/**
 * The secrets-at-rest keys: SECRETS_KEY (the first seals); the key derived from the deprecated
 * WEBHOOK_SECRETS_KEY, which seals when SECRETS_KEY is unset and opens otherwise; else, outside
 * production, the development key under DATA_DIR. The `v1:` webhook secrets of earlier versions
 * open with WEBHOOK_SECRETS_KEY, else the cookie secret they were sealed with.

/**
 * The secrets-at-rest keys: SECRETS_KEY (the first seals); the key derived from the deprecated
 * WEBHOOK_SECRETS_KEY, which seals when SECRETS_KEY is unset and opens otherwise; else, outside
 * production, the development key under DATA_DIR. The `v1:` webhook secrets of earlier versions
 * open with WEBHOOK_SECRETS_KEY, else the cookie secret they were sealed with.
 */
export function openSecrets(config: Config, cookieSecret: string | null): Secrets {
  const { keys, webhookSecretsKey } = config.secrets;
  const all: SecretKey[] = [...keys, ...(webhookSecretsKey ? [keyFromMaterial(LEGACY_KEY_ID, webhookSecretsKey)] : [])];
  if (all.length === 0) {
    if (config.env === 'production') throw new Error('production needs SECRETS_KEY');
    all.push(loadDevSecretKey(config.dataDir));
  }
  return new Secrets(all, webhookSecretsKey ?? cookieSecret);
}

/** The configured database; a connection that loses its server is reported to `logger` (and replaced by the pool). */
export async function openDatabase(config: Config, logger?: Logger): Promise<DatabaseHandle> {
  return config.databaseUrl
    ? openPostgres(config.databaseUrl, {
        poolSize: config.databasePoolSize,
        onConnectionError: (error) => logger?.warn('a database connection was lost', { error: error.message }),
      })
    : openPglite(path.join(config.dataDir, 'pglite'));
}

/** The metrics, with the queue depths read from the database at each scrape. */
export function createMetrics(database: DatabaseHandle): Metrics {
  return new Metrics({
    pendingDeliveries: () => countPendingDeliveries(database.db),
    queuedRuns: () => countQueuedRuns(database.db),
    pool: () => database.poolStats(),
  });
}
