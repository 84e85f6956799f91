import { ApiProperty } from '@nestjs/swagger';
import { HeldLock } from '../../common/errors';

export class LockView {
  @ApiProperty({ example: 'team-a/network/prod' })
  unit!: string;
  @ApiProperty({ example: 'default' })
  workspace!: string;
  @ApiProperty({ description: 'The lock ID (Terraform LockInfo.ID)' })
  id!: string;
  @ApiProperty({
    type: 'object',
    additionalProperties: true,
    description: 'Terraform LockInfo as the client sent it',
  })
  info!: Record<string, unknown>;
  @ApiProperty({ description: 'Principal holding the lock' })
  principal!: string;
  @ApiProperty()
  createdAt!: string;
  @ApiProperty({ description: 'Seconds since the lock was taken' })
  ageSeconds!: number;
}

export function lockView(
  unit: string,
  workspace: string,
  lock: HeldLock,
  now = Date.now(),
): LockView {
  let info: Record<string, unknown>;
  try {
    info = JSON.parse(lock.infoJson) as Record<string, unknown>;
  } catch {
    info = {};
  }
  const created = new Date(lock.createdAt);
  return {
    unit,
    workspace,
    id: lock.id,
    info,
    principal: lock.principal,
    createdAt: created.toISOString(),
    ageSeconds: Math.max(0, Math.floor((now - created.getTime()) / 1000)),
  };
}
