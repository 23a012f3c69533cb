import type { Server } from 'node:http';
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
  const runtime = await createRuntime(config, logger);
  const server: Server = createHttpServer(runtime.app).listen(config.port, config.host);
  await new Promise<void>((resolve, reject) => {
    server.once('listening', resolve);
    server.once('error', reject);
  });
  logger.info('listening', {
    port: config.port,
    database: runtime.database.kind,
    modelProvider: runtime.services.models.info.kind,
    startupMs: Math.round(performance.now() - started),
  });

  let stopping = false;
  const shutdown = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info('shutting down', { signal });
    runtime.drain();
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
}

main().catch((error: unknown) => {
  console.error(`start-up failed: ${error instanceof Error ? error.message : String(error)}`);
  process.exit(1);
});
