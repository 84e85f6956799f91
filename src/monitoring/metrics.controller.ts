import { Controller, Get, Res, UseGuards } from '@nestjs/common';
import {
  ApiOkResponse,
  ApiOperation,
  ApiProduces,
  ApiTags,
  ApiUnauthorizedResponse,
} from '@nestjs/swagger';
import type { Response } from 'express';
import { Public } from '../common/route-auth';
import { MetricsTokenGuard } from './metrics-token.guard';
import { MetricsService } from '../metrics/metrics.service';

@ApiTags('metrics')
@Public()
@UseGuards(MetricsTokenGuard)
@Controller()
export class MetricsController {
  constructor(private readonly metrics: MetricsService) {}

  @Get('metrics')
  @ApiOperation({
    summary: 'Prometheus metrics (text exposition format)',
    description:
      'Public unless STATEHOUSE_METRICS_TOKEN is set; then only `Authorization: Bearer <that token>` is answered. The metrics are described in the README ("Metrics").',
  })
  @ApiProduces('text/plain')
  @ApiOkResponse({ description: 'The metrics', schema: { type: 'string' } })
  @ApiUnauthorizedResponse({
    description: 'STATEHOUSE_METRICS_TOKEN is set and the request does not carry it',
  })
  async metricsText(@Res() res: Response): Promise<void> {
    const { contentType, body } = await this.metrics.exposition();
    // As the registry names it (Express's `send` would rewrite the parameters' order).
    res.status(200).setHeader('Content-Type', contentType);
    res.setHeader('Cache-Control', 'no-store');
    res.end(body);
  }
}
