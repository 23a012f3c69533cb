import type { Services } from './services';
import { KnowledgeIndexer } from '../areas/knowledge/indexer';
import { AutomationRunner, AutomationScheduler } from '../areas/automations/runner';
import { ReplyRecovery } from '../areas/conversations/recovery';
import { WebhookDispatcher } from '../areas/webhooks/dispatcher';
import type { Config } from '../config';
import { type DatabaseHandle, isConnectionFailure } from '../platform/db';
import { EmbeddingsFailure } from '../platform/ai/embeddings';
import type { Logger } from '../platform/logger';
import { Metrics } from '../platform/metrics';
import type { ObjectStore } from '../platform/storage';
import { PeriodicTask } from '../platform/workers';

/** The background workers, started by `compose` and stopped by `Composition.close`. */
export interface Workers {
  /** Embeds new and changed records in the background. */
  indexer: KnowledgeIndexer;
  /** Delivers outgoing webhooks in the background. */
  dispatcher: WebhookDispatcher;
  /** Queues the runs of due schedule slots (node-cron ticks). */
  scheduler: AutomationScheduler;
  /** Executes queued automation runs. */
  runner: AutomationRunner;
  /** Renews the leases of the chat replies being generated here; fails those whose instance stopped. */
  replies: ReplyRecovery;
  /** Removes the partial objects of uploads that never ended. */
  incomingSweep: PeriodicTask;
  /** Deletes the temporary conversations past their time to live. */
  temporarySweep: PeriodicTask;
}

/** The logging function the background workers take. */
export const workerLog =
  (logger: Logger) =>
  (level: 'info' | 'warn' | 'error', message: string, meta: Record<string, unknown>): void => {
    logger.log(level, message, meta);
  };

/** The workers other than the dispatcher (which the webhook service needs first), not started. */
interface WorkersDeps {
  config: Config;
  logger: Logger;
  database: DatabaseHandle;
  services: Services;
  store: ObjectStore;
  metrics: Metrics;
  dispatcher: WebhookDispatcher;
}

export function createWorkers({ config, logger, database, services, store, metrics, dispatcher }: WorkersDeps): Workers {
  const indexer = new KnowledgeIndexer({
    knowledge: services.knowledge,
    intervalMs: config.embeddings.indexIntervalMs,
    onError: (error, retryInMs, failures) =>
      // Embeddings failures are logged by the service when they start or change; other errors here.
      error instanceof EmbeddingsFailure
        ? logger.debug('knowledge indexing waits for the embeddings', { failures, retryInMs })
        : logger.warn('knowledge indexing failed', { error: (error as Error).message, failures, retryInMs }),
    maxBackoffMs: config.embeddings.indexMaxBackoffMs,
  });
  const log = workerLog(logger);
  const { automations, outputs, webhooks, capabilities, billing } = services;
  const runner = new AutomationRunner({
    db: database.db,
    automations,
    outputs,
    webhooks,
    capabilities,
    billing,
    settings: config.automations,
    log,
    onFinished: (status) => metrics.runsFinished.inc({ status }),
  });
  const scheduler = new AutomationScheduler({
    db: database.db,
    capabilities,
    tickCron: config.automations.tickCron,
    log,
    onQueued: () => runner.wake(),
  });
  const replies = new ReplyRecovery(
    services.chat,
    {
      leaseMs: config.models.replyLeaseMs,
      sweepIntervalMs: config.models.replyRecoveryIntervalMs,
      eventsRetentionMs: config.models.replyEventsRetentionMs,
    },
    log,
  );
  const incomingSweep = new PeriodicTask(
    config.storage.incomingSweepIntervalMs,
    async () => {
      const removed = await store.sweepIncoming(config.storage.incomingMaxAgeMs);
      if (removed > 0) logger.warn('removed partial objects of uploads that never ended', { objects: removed });
    },
    sweepFailed(logger, 'sweeping partial uploads failed'),
  );
  const temporarySweep = new PeriodicTask(
    config.models.temporarySweepIntervalMs,
    async () => {
      const deleted = await services.conversations.sweepTemporary(config.models.temporaryTtlMs);
      if (deleted > 0) logger.info('deleted temporary conversations past their time to live', { conversations: deleted });
    },
    sweepFailed(logger, 'sweeping temporary conversations failed'),
  );
  return { indexer, dispatcher, scheduler, runner, replies, incomingSweep, temporarySweep };
}

/** A sweep that failed: a database out of reach is expected now and then (the next run retries), anything else is an error. */
function sweepFailed(logger: Logger, message: string) {
  return (error: unknown) => logger.log(isConnectionFailure(error) ? 'warn' : 'error', message, { error: (error as Error).message });
}
