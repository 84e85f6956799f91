import 'reflect-metadata';
import { INestApplication, Logger, ValidationPipe } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { NestExpressApplication } from '@nestjs/platform-express';
import { SwaggerModule } from '@nestjs/swagger';
import { NextFunction, Request, Response } from 'express';
import { readFileSync } from 'node:fs';
import { createServer as createHttpServer, RequestListener, Server } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import { AppModule } from './app.module';
import { rejectMalformedEncoding } from './backend/raw-unit-path';
import { AppConfig } from './config/config';
import { RequestTracker, SIGNAL_EXIT_STATUS, StopSignal } from './common/graceful-stop';
import { useHttpHygiene } from './http-hygiene';
import { refuseWhileStopping, StopState } from './health/stopping';
import { AppLogger } from './logging/log-output';
import { beginRequest, runWithRequestContext } from './common/request-context';
import { RequestTextPipe } from './common/request-text.pipe';
import { printHeldNotices, StartAborted, StartupError } from './common/startup';
import { Standby, waitForMigrations } from './database/schema-wait';
import { openStandbyListener } from './health/standby-listener';
import { buildOpenApi } from './openapi';
import { GraphWriteHook } from './graph/graph-write-hook';
import { rejectMalformedS3Path, s3RootListener } from './s3compat/s3-listener';
import { S3_PREFIX } from './s3compat/s3-request';
import { MetricsService } from './metrics/metrics.service';
import { requestMetrics } from './monitoring/request-metrics';
import { withLeanRoutes } from './lean-routes';

/** Builds the application (not listening yet). Tests call this too. */
export async function createApp(
  config: AppConfig,
  tlsFiles: TlsFiles | undefined = config.tls ? readTlsFiles(config.tls) : undefined,
): Promise<NestExpressApplication> {
  const app = await NestFactory.create<NestExpressApplication>(AppModule.forRoot(config), {
    bodyParser: false,
    // The real logger from the first line on (not buffered): each line carries its own time.
    logger: new AppLogger(config),
    abortOnError: false,
    ...(tlsFiles ? { httpsOptions: tlsFiles } : {}),
  });
  app.set('etag', false);
  app.disable('x-powered-by');
  app.set('trust proxy', config.trustedProxies.length > 0 ? config.trustedProxies : false);

  app.use((req: Request, res: Response, next: NextFunction) => {
    runWithRequestContext(beginRequest(req, res, req.ip), next);
  });
  app.use(requestMetrics(app.get(MetricsService)));
  useHttpHygiene(app, config.corsOrigins);
  app.use(refuseWhileStopping(app.get(StopState)));
  app.use('/v1/backend', rejectMalformedEncoding);
  app.use(S3_PREFIX, rejectMalformedS3Path);
  app.useGlobalPipes(
    new RequestTextPipe(),
    new ValidationPipe({ whitelist: true, forbidNonWhitelisted: true, transform: true }),
  );
  SwaggerModule.setup('docs', app, () => buildOpenApi(app), {
    jsonDocumentUrl: 'docs/openapi.json',
  });
  // The hot routes below Express, on this listener and on the S3 door's own (`s3DoorServer`).
  const listener = withLeanRoutes(app, config);
  const server: Server = app.getHttpServer();
  server.removeListener('request', app.getHttpAdapter().getInstance() as RequestListener);
  server.on('request', listener);
  LISTENERS.set(app, listener);
  return app;
}

type TlsFiles = { cert: Buffer; key: Buffer };

/** Each application's request listener: Express with the lean routes in front. */
const LISTENERS = new WeakMap<NestExpressApplication, RequestListener>();

function readTlsFiles(tls: { certFile: string; keyFile: string }): TlsFiles {
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

/** A listening server: the main one, or the S3 door's own (STATEHOUSE_S3_PORT). */
export interface Listener {
  server: Server;
  requests: RequestTracker;
  port: number;
}

/**
 * Starts the server and resolves once it listens — on PORT, and with STATEHOUSE_S3_PORT also on
 * the S3 door's own listener (same host, same TLS); what start-up held back is printed last.
 */
export async function startServer(
  config: AppConfig,
  options: { stop?: AbortSignal } = {},
): Promise<{ app: INestApplication; listeners: Listener[] }> {
  const started = Date.now();
  const logger = new Logger('statehouse');
  const scheme = config.tls ? 'https' : 'http';
  let standby: Standby | undefined;
  try {
    const tlsFiles = config.tls ? readTlsFiles(config.tls) : undefined;
    // Not ready (and alive) until the migrations Job has run: see schema-wait.ts.
    standby =
      config.databaseUrl && !config.migrate
        ? await waitForMigrations(
            config,
            (reason) =>
              openStandbyListener(config.port, config.host, tlsFiles, reason).catch(
                (e: unknown) => {
                  throw listenFailure(e, config.host, config.port, 'PORT');
                },
              ),
            new AppLogger(config),
            options.stop,
          )
        : undefined;
    const app = await createApp(config, tlsFiles);
    for (const w of config.warnings) logger.warn(w);
    const main: Server = app.getHttpServer();
    const listeners: Listener[] = [{ server: main, requests: new RequestTracker(main), port: 0 }];
    await standby?.close();
    await app.listen(config.port, config.host).catch(async (e: unknown) => {
      await app.close().catch(() => undefined);
      throw listenFailure(e, config.host, config.port, 'PORT');
    });
    listeners[0].port = portOf(main);
    if (config.s3Door.port !== undefined) {
      const door = s3DoorServer(app, tlsFiles);
      const requests = new RequestTracker(door);
      await listen(door, config.s3Door.port, config.host).catch(async (e: unknown) => {
        await app.close().catch(() => undefined);
        throw listenFailure(e, config.host, config.s3Door.port ?? 0, 'STATEHOUSE_S3_PORT');
      });
      listeners.push({ server: door, requests, port: portOf(door) });
    }
    app.get(GraphWriteHook).listeningOn(listeners[0].port, scheme, listeners[1]?.port);
    const at = (port: number) => `${scheme}://${config.host}:${port}`;
    logger.log(
      `Statehouse listening on ${at(listeners[0].port)}` +
        (listeners[1]
          ? `, and for S3 clients on ${at(listeners[1].port)} (the S3 door at its root)`
          : '') +
        ` (started in ${Date.now() - started} ms, storage ${config.storage.driver}, database ${config.databaseUrl ? 'postgresql' : 'embedded'})`,
    );
    return { app, listeners };
  } finally {
    await standby?.close();
    printHeldNotices();
  }
}

/** The S3 door's own listener: the same application, reached only through the S3 door. */
function s3DoorServer(app: NestExpressApplication, tlsFiles: TlsFiles | undefined): Server {
  const handler = s3RootListener(LISTENERS.get(app) as RequestListener);
  return tlsFiles ? createHttpsServer(tlsFiles, handler) : createHttpServer(handler);
}

function listen(server: Server, port: number, host: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const failed = (e: Error) => reject(e);
    server.once('error', failed);
    server.listen(port, host, () => {
      server.off('error', failed);
      resolve();
    });
  });
}

function portOf(server: Server): number {
  const address = server.address();
  return address !== null && typeof address === 'object' ? address.port : 0;
}

function listenFailure(e: unknown, host: string, port: number, setting: string): unknown {
  const code = (e as NodeJS.ErrnoException).code;
  const where = `${host}:${port}`;
  if (code === 'EADDRINUSE') {
    return new StartupError(`cannot listen on ${where}: the address is in use (${setting})`);
  }
  if (code === 'EACCES') {
    return new StartupError(`cannot listen on ${where}: permission denied (${setting})`);
  }
  if (code === 'EADDRNOTAVAIL' || code === 'ENOTFOUND') {
    return new StartupError(`cannot listen on ${where}: no such address here (STATEHOUSE_HOST)`);
  }
  return e;
}

/** How long the modules may take to close after the requests are done. */
const CLOSE_TIMEOUT_MS = 10_000;

/**
 * `statehouse serve`: starts, then on SIGTERM or SIGINT stops cleanly, and exits 143 (SIGTERM)
 * or 130 (SIGINT), or 1 when that failed (see `stop`). The signal may arrive twice at once (a
 * terminal's Ctrl-C reaches npm and the server, and npm passes it on): a repeat within a second
 * is the same request; a later one stops at once.
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

  const starting = new AbortController();
  void stopRequested.then((signal) => starting.abort(signal));
  const { app, listeners } = await startServer(config, { stop: starting.signal }).catch(
    (e: unknown) => {
      if (!(e instanceof StartAborted)) throw e;
      // Stopped while waiting to start: nothing ran yet, nothing to drain. (No application
      // yet, so no application logger either: this line gets its own.)
      new AppLogger(config).log(`${e.signal}: stopped before starting`, 'shutdown');
      process.exit(SIGNAL_EXIT_STATUS[first?.signal ?? 'SIGTERM']);
    },
  );
  const signal = await stopRequested;
  const clean = await stop(app, listeners, signal, config, logger);
  process.exit(clean ? SIGNAL_EXIT_STATUS[signal] : 1);
}

/**
 * The stop, in order; true when it was clean.
 *  1. At once: `/readyz` answers 503, every request that arrives from now on is refused (503,
 *     `Connection: close`, in its door's format), and each connection closes after its current
 *     answer. Requests in flight go on.
 *  2. For the grace (STATEHOUSE_SHUTDOWN_GRACE) new connections are still accepted — and
 *     refused that way — for a load balancer that has not yet seen `/readyz` turn 503; then no
 *     more connections.
 *  3. The requests in flight finish, until STATEHOUSE_SHUTDOWN_TIMEOUT after the signal; what
 *     is still open then is cut off (not clean).
 *  4. The modules close: the audit queue is stored, and the database closes last. Locks held
 *     by clients stay as they are: they belong to Terraform runs, not to this process.
 */
async function stop(
  app: INestApplication,
  listeners: Listener[],
  signal: StopSignal,
  config: AppConfig,
  logger: Logger,
): Promise<boolean> {
  const started = Date.now();
  const deadline = started + config.shutdownTimeoutSeconds * 1000;
  app.get(StopState).begin(signal);
  for (const l of listeners) l.requests.beginStop();
  const inFlight = listeners.reduce((n, l) => n + l.requests.count, 0);
  logger.log(
    `${signal}: stopping (${inFlight} request(s) in flight get up to ${config.shutdownTimeoutSeconds} s; ` +
      `new requests are answered 503, new connections refused after ${config.shutdownGraceSeconds} s)`,
  );
  await new Promise((r) => setTimeout(r, config.shutdownGraceSeconds * 1000));
  // Every listener stops taking connections at once, and its requests finish.
  const drained = await Promise.all(listeners.map((l) => l.requests.drain(deadline)));
  let clean = drained.every((d) => d);
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
  if (clean) logger.log(`stopped cleanly in ${Date.now() - started} ms`);
  return clean;
}

function withTimeout<T>(work: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} took longer than ${ms} ms`)), ms);
  });
  return Promise.race([work, timeout]).finally(() => clearTimeout(timer));
}
