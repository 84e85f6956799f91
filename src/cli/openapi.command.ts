import { NestFactory } from '@nestjs/core';
import { writeFileSync } from 'node:fs';
import { AppModule } from '../app.module';
import { loadConfig } from '../config/config';
import { buildOpenApi } from '../openapi';

/**
 * The OpenAPI document of the app, built in Nest's preview mode: no provider is instantiated,
 * so no database is needed. The same function the server uses at /docs.
 */
export async function generateOpenApi(): Promise<string> {
  const config = loadConfig({
    NODE_ENV: 'test',
    STATEHOUSE_STORAGE: 'memory',
    STATEHOUSE_DATA_DIR: '/nonexistent',
  });
  const app = await NestFactory.create(AppModule.forRoot(config), {
    preview: true,
    logger: false,
    abortOnError: false,
  });
  try {
    return `${JSON.stringify(buildOpenApi(app), null, 2)}\n`;
  } finally {
    await app.close();
  }
}

export async function runOpenApiCommand(out: string | undefined): Promise<void> {
  const doc = await generateOpenApi();
  if (out) writeFileSync(out, doc);
  else process.stdout.write(doc);
}
