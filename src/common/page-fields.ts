import { applyDecorators } from '@nestjs/common';
import { ApiPropertyOptional } from '@nestjs/swagger';
import { Type } from 'class-transformer';
import { IsInt, IsOptional, IsString, Max, Min } from 'class-validator';

/**
 * The query fields every paged list of the management API shares. The decorators are applied in
 * the order a stack of them written above the property would be (the lowest first).
 */

/** `limit`: optional, a whole number from 1 to 1000; 100 when absent. */
export const PageLimit = (): PropertyDecorator =>
  applyDecorators(
    Max(1000),
    Min(1),
    IsInt(),
    Type(() => Number),
    IsOptional(),
    ApiPropertyOptional({ minimum: 1, maximum: 1000, default: 100 }),
  );

/**
 * `cursor`: optional, the previous page's nextCursor; `rules` are the list's own checks of its
 * shape (a list's cursors differ in what they encode).
 */
export const PageCursor = (...rules: PropertyDecorator[]): PropertyDecorator =>
  applyDecorators(
    ...rules,
    IsString(),
    IsOptional(),
    ApiPropertyOptional({ description: 'nextCursor of the previous page' }),
  );
