import { createServices, type Services } from './services';
import { createMetrics, openDatabase, openObjectStore, openSecrets, resolveModels } from './resources';
import { createWorkers, type Workers, workerLog } from './workers';

import type { OpenAPIV3 } from 'express-openapi-validator/dist/framework/types';
import { WebhookDispatcher } from '../areas/webhooks/dispatcher';
import { type Config, hasIdentityProvider } from '../config';
import { loadApiDocument } from '../http/openapi';
import type { DatabaseHandle } from '../platform/db';
import { migrateToLatest } from '../platform/db/migrate';
import { hasVectorExtension } from '../platform/db/vector';
import type { Logger } from '../platform/logger';
import { Metrics } from '../platform/metrics';
import { SignedUrls } from '../platform/signed-urls';
import type { ObjectStore } from '../platform/storage';
import { Outbound } from '../platform/net/outbound';
import { Secrets } from '../platform/secrets';
import { createTokenVerifier, type DevAuthMaterial, loadDevAuthMaterial, type TokenVerifier } from '../platform/tokens';

export type { Services, ServicesDeps } from './services';
export type { Workers } from './workers';
export { openDatabase, openObjectStore, openSecrets, SEALED_COLUMNS } from './resources';

/** Everything the service is made of, before any HTTP: what `app.ts` wires into routes. */
export interface Composition {
  config: Config;
  /** The bundled OpenAPI document the routes are built and validated from. */
  doc: OpenAPIV3.DocumentV3;
  database: DatabaseHandle;
  services: Services;
  workers: Workers;
  /** Development signing material (null with an identity provider). */
  devAuth: DevAuthMaterial | null;
  cookieSecret: string;
  verifyToken: TokenVerifier;
  signedUrls: SignedUrls;
  store: ObjectStore;
  /** Seals and opens every stored secret. */
  secrets: Secrets;
  /** The guard of every request to a URL a user chose. */
  outbound: Outbound;
  metrics: Metrics;
  /** Stops the workers and closes the object store and the database. */
  close(): Promise<void>;
}

/**
 * Builds the service on a database (opened from the configuration unless given): migrations,
 * secrets, authentication material, the services, and the workers, started. Administrators named in
 * BOOTSTRAP_ADMIN_USER_IDS are granted the role before the workers start. A database opened here is
 * closed if the start fails.
 */
export async function compose(config: Config, logger: Logger, database?: DatabaseHandle): Promise<Composition> {
  const db = database ?? (await openDatabase(config, logger));
  try {
    await migrateToLatest(db.db);
    const devAuth = hasIdentityProvider(config) ? null : await loadDevAuthMaterial(config.dataDir);
    const cookieSecret = config.auth.cookieSecret ?? devAuth?.cookieSecret;
    if (!cookieSecret) throw new Error('no cookie secret');
    const store = openObjectStore(config);
    const signedUrls = new SignedUrls(cookieSecret, config.signedUrlTtlSeconds);
    const vectorAvailable = await hasVectorExtension(db.db);
    const secrets = openSecrets(config, cookieSecret);
    const outbound = new Outbound(config.outbound);
    const metrics = createMetrics(db);
    const dispatcher = new WebhookDispatcher({
      db: db.db,
      secrets,
      outbound,
      settings: config.webhooks,
      log: workerLog(logger),
      onAttempt: (outcome) => metrics.deliveryAttempts.inc({ outcome }),
    });
    const modelList = await resolveModels(config, logger);
    const doc = loadApiDocument();
    const services = createServices({
      config,
      database: db,
      store,
      signedUrls,
      logger,
      vectorAvailable,
      dispatcher,
      secrets,
      modelList,
      outbound,
      doc,
      metrics,
    });
    const verifyToken = await createTokenVerifier(config.auth, devAuth, Date.now, services.onTokenVerified);
    const workers = createWorkers({ config, logger, database: db, services, store, metrics, dispatcher });
    const bootstrapped = await services.principals.ensureRole(
      { userId: 'system:bootstrap', requestId: null },
      config.bootstrapAdminUserIds,
      'admin',
      'BOOTSTRAP_ADMIN_USER_IDS',
    );
    if (bootstrapped.length > 0) logger.info('granted admin from BOOTSTRAP_ADMIN_USER_IDS', { userIds: bootstrapped });
    for (const worker of Object.values(workers)) worker.start();
    return {
      config,
      doc,
      database: db,
      services,
      workers,
      devAuth,
      cookieSecret,
      verifyToken,
      signedUrls,
      store,
      secrets,
      outbound,
      metrics,
      close: async () => {
        await workers.scheduler.stop();
        const { indexer, runner, replies, incomingSweep, temporarySweep } = workers;
        await Promise.all([
          indexer.stop(),
          dispatcher.stop(),
          runner.stop(),
          replies.stop(),
          incomingSweep.stop(),
          temporarySweep.stop(),
          services.chat.titles.settle(),
          services.integrationAuthorization.settle(),
        ]);
        store.close();
        await db.close();
      },
    };
  } catch (error) {
    if (!database) await db.close();
    throw error;
  }
}
