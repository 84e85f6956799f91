import { Controller, Get, Inject, Query } from '@nestjs/common';
import {
  ApiBearerAuth,
  ApiOkResponse,
  ApiOperation,
  ApiProperty,
  ApiPropertyOptional,
  ApiTags,
} from '@nestjs/swagger';
import { IsDateString, IsOptional, IsString, Matches, MaxLength } from 'class-validator';
import { PageCursor, PageLimit } from '../common/page-fields';
import { CurrentPrincipal } from '../common/route-auth';
import type { Principal } from '../common/principal';
import { DomainError } from '../common/errors';
import { UnitNameLength } from '../common/name-fields';
import { AUDIT_READ_AUTHORIZER, AuditReadAuthorizer } from './audit-read-authorizer';
import { AuditService } from './audit.service';

class AuditQuery {
  @ApiPropertyOptional({
    description: 'Principal subject (user:…, svc:…, bootstrap-admin, anonymous)',
  })
  @IsOptional()
  @IsString()
  @MaxLength(300)
  principal?: string;

  @ApiPropertyOptional({ description: 'Unit name' })
  @IsOptional()
  @IsString()
  @UnitNameLength()
  resource?: string;

  @ApiPropertyOptional({ example: 'unit.write' })
  @IsOptional()
  @IsString()
  @MaxLength(64)
  action?: string;

  @ApiPropertyOptional({ example: 'lock.force_unlock' })
  @IsOptional()
  @IsString()
  @MaxLength(64)
  type?: string;

  @ApiPropertyOptional({ description: 'From (ISO 8601, inclusive)' })
  @IsOptional()
  @IsDateString()
  since?: string;

  @ApiPropertyOptional({ description: 'Until (ISO 8601, exclusive)' })
  @IsOptional()
  @IsDateString()
  until?: string;

  @PageLimit()
  limit?: number;

  @PageCursor(Matches(/^\d{1,20}$/, { message: 'cursor is not one this server returned' }))
  cursor?: string;
}

class AuditEventView {
  @ApiProperty() id!: string;
  @ApiProperty() at!: string;
  @ApiProperty() type!: string;
  @ApiProperty() principal!: string;
  @ApiPropertyOptional({ type: String, nullable: true }) action!: string | null;
  @ApiPropertyOptional({ type: String, nullable: true }) resource!: string | null;
  @ApiPropertyOptional({ type: String, nullable: true }) workspace!: string | null;
  @ApiProperty({ enum: ['success', 'denied', 'failure'] }) decision!: string;
  @ApiPropertyOptional({ type: String, nullable: true }) door!: string | null;
  @ApiPropertyOptional({ type: String, nullable: true }) requestId!: string | null;
  @ApiPropertyOptional({ type: String, nullable: true }) clientIp!: string | null;
  @ApiPropertyOptional({ type: 'object', additionalProperties: true, nullable: true })
  details!: Record<string, unknown> | null;
  @ApiProperty({
    description: 'How many identical events the row stands for (aggregated failures)',
  })
  count!: number;
}

class AuditPageView {
  @ApiProperty({ type: [AuditEventView] }) items!: AuditEventView[];
  @ApiPropertyOptional({ type: String, nullable: true }) nextCursor!: string | null;
}

@ApiTags('audit')
@ApiBearerAuth()
@Controller('v1/audit')
export class AuditController {
  constructor(
    private readonly audit: AuditService,
    @Inject(AUDIT_READ_AUTHORIZER) private readonly readers: AuditReadAuthorizer,
  ) {}

  @Get()
  @ApiOperation({ summary: 'Security events, newest first (needs audit.read)' })
  @ApiOkResponse({ type: AuditPageView })
  async list(
    @Query() q: AuditQuery,
    @CurrentPrincipal() principal: Principal,
  ): Promise<AuditPageView> {
    await this.readers.authorizeRead(principal);
    const since = q.since ? new Date(q.since) : undefined;
    const until = q.until ? new Date(q.until) : undefined;
    if (since && until && since >= until)
      throw new DomainError('invalid_request', 'since must be before until');
    const limit = q.limit ?? 100;
    const rows = await this.audit.query({
      actor: q.principal,
      unit: q.resource,
      action: q.action,
      type: q.type,
      since,
      until,
      before: q.cursor,
      limit: limit + 1,
    });
    const items = rows.slice(0, limit).map((r) => ({
      id: String(r.id),
      at: new Date(r.at).toISOString(),
      type: r.type,
      principal: r.actor,
      action: r.action,
      resource: r.unit,
      workspace: r.workspace,
      decision: r.outcome,
      door: r.door,
      requestId: r.request_id,
      clientIp: r.client_ip,
      details: r.details,
      count: r.count,
    }));
    return { items, nextCursor: rows.length > limit ? items[items.length - 1].id : null };
  }
}
