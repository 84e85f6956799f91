import { Controller, Get, HttpException, Inject, Res } from '@nestjs/common';
import {
  ApiOkResponse,
  ApiOperation,
  ApiServiceUnavailableResponse,
  ApiTags,
} from '@nestjs/swagger';
import { HealthCheckService, HealthIndicatorService } from '@nestjs/terminus';
import type { Response } from 'express';
import { DataSource } from 'typeorm';
import { Public } from '../common/route-auth';
import { codeSchema, schemaVerdict } from '../database/migrator';
import { refusalMessage } from '../database/schema-compat';
import { StopState } from './stopping';
import { BLOB_STORE, BlobStore } from '../storage/blob-store';

const PROBE_TIMEOUT_MS = 3000;

function withTimeout<T>(work: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new Error(`no answer within ${PROBE_TIMEOUT_MS} ms`)),
      PROBE_TIMEOUT_MS,
    );
  });
  return Promise.race([work, timeout]).finally(() => clearTimeout(timer));
}

@ApiTags('health')
@Public()
@Controller()
export class HealthController {
  constructor(
    private readonly health: HealthCheckService,
    private readonly indicators: HealthIndicatorService,
    private readonly db: DataSource,
    @Inject(BLOB_STORE) private readonly blobs: BlobStore,
    private readonly stop: StopState,
  ) {}

  @Get('healthz')
  @ApiOperation({ summary: 'Liveness: the process answers' })
  @ApiOkResponse({ description: '{"status":"ok"}' })
  healthz(): { status: string } {
    return { status: 'ok' };
  }

  @Get('readyz')
  @ApiOperation({
    summary:
      'Readiness: the database and the blob store answer, the schema still accepts this release, and the server is not stopping',
  })
  @ApiOkResponse({ description: 'Terminus health report' })
  @ApiServiceUnavailableResponse({
    description: 'A dependency is down, or the server is stopping (named in the report)',
  })
  async readyz(@Res() res: Response): Promise<void> {
    if (this.stop.stopping) {
      // At once, without asking the dependencies: the load balancer should stop sending now.
      const down = { status: 'down', message: `stopping (${this.stop.reason})` };
      res
        .status(503)
        .json({ status: 'error', info: {}, error: { server: down }, details: { server: down } });
      return;
    }
    try {
      const report = await this.health.check([
        () => this.probe('database', () => this.db.query('SELECT 1')),
        () => this.probe('blobStore', () => this.blobs.ping(), { driver: this.blobs.driver }),
        // A newer release's contract migration may have left this one behind while it ran.
        () => this.probe('schema', () => this.schemaAccepts()),
      ]);
      res.status(200).json(report);
    } catch (e) {
      if (e instanceof HttpException) res.status(e.getStatus()).json(e.getResponse());
      else throw e;
    }
  }

  private async schemaAccepts(): Promise<void> {
    const verdict = await schemaVerdict(this.db);
    if (verdict.kind === 'refused') throw new Error(refusalMessage(codeSchema(), verdict));
  }

  private async probe<K extends string>(
    key: K,
    work: () => Promise<unknown>,
    extra: Record<string, string> = {},
  ) {
    const session = this.indicators.check(key);
    try {
      await withTimeout(work());
      return session.up(extra);
    } catch (e) {
      // Say which dependency is down, without echoing connection strings.
      return session.down({ ...extra, message: (e as Error).message.slice(0, 500) });
    }
  }
}
