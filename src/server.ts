import type { Server, ServerResponse } from 'node:http';
import { createRuntime } from './app';
import { ConfigError, hasIdentityProvider, loadConfig } from './config';
import { createHttpServer } from './http/server';
import { createLogger } from './platform/logger';

async function main(): Promise<void> {
  const started = performance.now();
  let config;
  try {
    config = loadConfig();
  } catch (error) {
    if (error instanceof ConfigError) {
      console.error(error.message);
      process.exit(1);
    }
    throw error;
  }
  const logger = createLogger(config.logLevel);
  if (!hasIdentityProvider(config)) {
    logger.warn(
      'DEVELOPMENT MODE: no identity provider is configured; tokens are signed by a local key under DATA_DIR. ' +
        'Mint one with `make token USER=<id>`. Never run like this in production.',
      { dataDir: config.dataDir },
    );
  }
  let runtime;
  try {
    runtime = await createRuntime(config, logger);
  } catch (error) {
    // A setting found unusable at start (e.g. a model list that cannot be read): said plainly.
    if (error instanceof ConfigError) {
      logger.error(error.message);
      process.exit(1);
    }
    throw error;
  }
  const server: Server = createHttpServer(runtime.app, config.http).listen(config.port, config.host);
  await new Promise<void>((resolve, reject) => {
    server.once('listening', resolve);
    server.once('error', reject);
  });
  let stopping = false;
  let endDrain: (() => void) | undefined;
  const shutdown = async (signal: string) => {
    if (stopping) {
      // A second signal ends the drain period early.
      endDrain?.();
      return;
    }
    stopping = true;
    // SIGTERM is an orchestrator's stop: keep serving for the drain period while /readyz answers
    // 503, so that a load balancer moves traffic away before the listener closes (answers say
    // `Connection: close` meanwhile). SIGINT (Ctrl-C) or a second signal stops without it.
    const drainMs = signal === 'SIGTERM' ? config.shutdownDrainMs : 0;
    logger.info('shutting down', { signal, drainMs });
    runtime.drain();
    if (drainMs > 0) {
      server.prependListener('request', (_req, res: ServerResponse) => {
        res.shouldKeepAlive = false;
      });
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, drainMs);
        endDrain = () => {
          clearTimeout(timer);
          resolve();
        };
      });
    }
    const force = setTimeout(() => {
      logger.error('shutdown timed out; exiting');
      // Best effort: the replies still streaming are failed `interrupted` here (within 2 s);
      // otherwise another instance's sweep fails them once their lease ends.
      const interrupted = runtime.interruptReplies().catch(() => 0);
      void Promise.race([interrupted, new Promise((resolve) => setTimeout(resolve, 2000))]).finally(() => process.exit(1));
    }, config.shutdownTimeoutMs);
    force.unref();
    // Stop accepting connections, let in-flight requests finish, then close the database.
    await new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeIdleConnections();
    });
    await runtime.close();
    logger.info('stopped');
    process.exit(0);
  };
  process.on('SIGTERM', () => void shutdown('SIGTERM'));
  process.on('SIGINT', () => void shutdown('SIGINT'));
  // Said once the signals are handled: a supervisor that stops the process as soon as it reads
  // this line (a test, an orchestrator's quick restart) gets a graceful stop, not the default kill.
  logger.info('listening', {
    port: config.port,
    node: process.version,
    database: runtime.database.kind,
    modelProvider: runtime.services.models.deploymentProvider.info.kind,
    startupMs: Math.round(performance.now() - started),
  });
}

main().catch((error: unknown) => {
  console.error(`start-up failed: ${error instanceof Error ? error.message : String(error)}`);
  process.exit(1);
});
