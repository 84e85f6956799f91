import 'reflect-metadata';
import { INestApplication, ValidationPipe } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { NestExpressApplication } from '@nestjs/platform-express';
import { SwaggerModule } from '@nestjs/swagger';
import { NextFunction, Request, Response } from 'express';
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { Logger } from 'nestjs-pino';
import { AppModule } from './app.module';
import { rejectMalformedEncoding } from './backend/raw-unit-path';
import { AppConfig } from './config/config';
import { runWithRequestContext } from './common/request-context';
import { RequestTextPipe } from './common/request-text.pipe';
import { buildOpenApi } from './openapi';
import { GraphService } from './graph/graph.service';

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** Builds the application (not listening yet). Tests call this too. */
export async function createApp(config: AppConfig): Promise<NestExpressApplication> {
  const app = await NestFactory.create<NestExpressApplication>(AppModule.forRoot(config), {
    bodyParser: false,
    bufferLogs: true,
    abortOnError: false,
    ...(config.tls
      ? {
          httpsOptions: {
            cert: readFileSync(config.tls.certFile),
            key: readFileSync(config.tls.keyFile),
          },
        }
      : {}),
  });
  app.useLogger(app.get(Logger));
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
  app.use('/v1/backend', rejectMalformedEncoding);
  app.useGlobalPipes(
    new RequestTextPipe(),
    new ValidationPipe({ whitelist: true, forbidNonWhitelisted: true, transform: true }),
  );
  SwaggerModule.setup('docs', app, () => buildOpenApi(app), {
    jsonDocumentUrl: 'docs/openapi.json',
  });
  app.enableShutdownHooks();
  return app;
}

/** Starts the server and resolves once it listens. */
export async function startServer(config: AppConfig): Promise<INestApplication> {
  const started = Date.now();
  const app = await createApp(config);
  for (const w of config.warnings) app.get(Logger).warn(w);
  await app.listen(config.port, config.host);
  const address = app.getHttpServer().address() as { port: number } | string;
  if (typeof address !== 'string') {
    app.get(GraphService).listeningOn(address.port, config.tls ? 'https' : 'http');
  }
  app
    .get(Logger)
    .log(
      `Statehouse listening on ${config.tls ? 'https' : 'http'}://${config.host}:${typeof address === 'string' ? address : address.port} (started in ${Date.now() - started} ms, storage ${config.storage.driver}, database ${config.databaseUrl ? 'postgresql' : 'embedded'})`,
    );
  return app;
}
