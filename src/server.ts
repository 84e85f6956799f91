import 'reflect-metadata';
import { INestApplication, Logger, ValidationPipe } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { NestExpressApplication } from '@nestjs/platform-express';
import { SwaggerModule } from '@nestjs/swagger';
import { NextFunction, Request, Response } from 'express';
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { AppModule } from './app.module';
import { rejectMalformedEncoding } from './backend/raw-unit-path';
import { AppConfig } from './config/config';
import { RequestTracker, SIGNAL_EXIT_STATUS, StopSignal } from './common/graceful-stop';
import { AppLogger } from './common/log-output';
import { runWithRequestContext } from './common/request-context';
import { RequestTextPipe } from './common/request-text.pipe';
import { printHeldNotices, StartupError } from './common/startup';
import { buildOpenApi } from './openapi';
import { GraphService } from './graph/graph.service';
import { MetricsService } from './metrics/metrics.service';
import { requestMetrics } from './metrics/request-metrics';

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** Builds the application (not listening yet). Tests call this too. */
export async function createApp(config: AppConfig): Promise<NestExpressApplication> {
  const app = await NestFactory.create<NestExpressApplication>(AppModule.forRoot(config), {
    bodyParser: false,
    // The real logger from the first line on (not buffered): each line carries its own time.
    logger: new AppLogger(config),
    abortOnError: false,
    ...(config.tls ? { httpsOptions: readTlsFiles(config.tls) } : {}),
  });
  app.set('etag', false);
  app.disable('x-powered-by');
  app.set('trust proxy', config.trustedProxies.length > 0 ? config.trustedProxies : false);

  app.use((req: Request & { id?: string }, res: Response, next: NextFunction) => {
    const incoming = req.headers['x-request-id'];
    const id = typeof incoming === 'string' && REQUEST_ID.test(incoming) ? incoming : randomUUID();
    req.id = id;
    res.setHeader('X-Request-Id', id);
    runWithRequestContext({ requestId: id, clientIp: req.ip }, next);
  });
  app.use(requestMetrics(app.get(MetricsService)));
  app.use('/v1/backend', rejectMalformedEncoding);
  app.useGlobalPipes(
    new RequestTextPipe(),
    new ValidationPipe({ whitelist: true, forbidNonWhitelisted: true, transform: true }),
  );
  SwaggerModule.setup('docs', app, () => buildOpenApi(app), {
    jsonDocumentUrl: 'docs/openapi.json',
  });
  return app;
}

function readTlsFiles(tls: { certFile: string; keyFile: string }): { cert: Buffer; key: Buffer } {
  const read = (setting: string, file: string): Buffer => {
    try {
      return readFileSync(file);
    } catch (e) {
      throw new StartupError(`${setting} cannot be read: ${(e as Error).message}`);
    }
  };
  return {
    cert: read('STATEHOUSE_TLS_CERT_FILE', tls.certFile),
    key: read('STATEHOUSE_TLS_KEY_FILE', tls.keyFile),
  };
}

/** Starts the server and resolves once it listens; what start-up held back is printed last. */
export async function startServer(
  config: AppConfig,
): Promise<{ app: INestApplication; requests: RequestTracker }> {
  const started = Date.now();
  const logger = new Logger('statehouse');
  try {
    const app = await createApp(config);
    for (const w of config.warnings) logger.warn(w);
    const requests = new RequestTracker(app.getHttpServer());
    await app.listen(config.port, config.host).catch(async (e: unknown) => {
      await app.close().catch(() => undefined);
      throw listenFailure(e, config);
    });
    const address = app.getHttpServer().address() as { port: number } | string;
    if (typeof address !== 'string') {
      app.get(GraphService).listeningOn(address.port, config.tls ? 'https' : 'http');
    }
    logger.log(
      `Statehouse listening on ${config.tls ? 'https' : 'http'}://${config.host}:${typeof address === 'string' ? address : address.port} (started in ${Date.now() - started} ms, storage ${config.storage.driver}, database ${config.databaseUrl ? 'postgresql' : 'embedded'})`,
    );
    return { app, requests };
  } finally {
    printHeldNotices();
  }
}

function listenFailure(e: unknown, config: AppConfig): unknown {
  const code = (e as NodeJS.ErrnoException).code;
  const where = `${config.host}:${config.port}`;
  if (code === 'EADDRINUSE') {
    return new StartupError(`cannot listen on ${where}: the address is in use (PORT)`);
  }
  if (code === 'EACCES') {
    return new StartupError(`cannot listen on ${where}: permission denied (PORT)`);
  }
  if (code === 'EADDRNOTAVAIL' || code === 'ENOTFOUND') {
    return new StartupError(`cannot listen on ${where}: no such address here (STATEHOUSE_HOST)`);
  }
  return e;
}

/** How long the modules may take to close after the requests are done. */
const CLOSE_TIMEOUT_MS = 10_000;

/**
 * `statehouse serve`: starts, then on SIGTERM or SIGINT stops cleanly — no new connections,
 * requests in flight finished (up to STATEHOUSE_SHUTDOWN_TIMEOUT), then the modules closed with
 * the database last — and exits 143 (SIGTERM) or 130 (SIGINT), or 1 when that failed. The
 * signal may arrive twice at once (a terminal's Ctrl-C reaches npm and the server, and npm
 * passes it on): a repeat within a second is the same request; a later one stops at once.
 */
export async function serve(config: AppConfig): Promise<never> {
  const logger = new Logger('shutdown');
  let first: { signal: StopSignal; at: number } | undefined;
  let requestStop: (signal: StopSignal) => void = () => undefined;
  const stopRequested = new Promise<StopSignal>((resolve) => (requestStop = resolve));
  const onSignal = (signal: StopSignal): void => {
    if (!first) {
      first = { signal, at: Date.now() };
      requestStop(signal);
    } else if (Date.now() - first.at > 1000) {
      logger.error(`${signal} again: exiting now, without finishing`);
      process.exit(1);
    }
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);

  const { app, requests } = await startServer(config);
  const signal = await stopRequested;
  logger.log(
    `${signal}: stopping (no new connections; ${requests.count} request(s) in flight get up to ${config.shutdownTimeoutSeconds} s)`,
  );
  let clean = await requests.drain(config.shutdownTimeoutSeconds * 1000);
  if (!clean) {
    logger.error(
      `requests still in flight after ${config.shutdownTimeoutSeconds} s (STATEHOUSE_SHUTDOWN_TIMEOUT): their connections were closed`,
    );
  }
  try {
    await withTimeout(app.close(), CLOSE_TIMEOUT_MS, 'closing the modules');
  } catch (e) {
    logger.error(`shutdown failed: ${(e as Error).message}`);
    clean = false;
  }
  if (clean) logger.log('stopped cleanly');
  process.exit(clean ? SIGNAL_EXIT_STATUS[signal] : 1);
}

function withTimeout<T>(work: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} took longer than ${ms} ms`)), ms);
  });
  return Promise.race([work, timeout]).finally(() => clearTimeout(timer));
}
