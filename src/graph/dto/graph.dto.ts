import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { Type } from 'class-transformer';
import {
  ArrayMaxSize,
  IsArray,
  IsDefined,
  IsIn,
  IsObject,
  IsOptional,
  IsString,
  Matches,
  MaxLength,
  ValidateNested,
} from 'class-validator';
import { UnitNameLength, WorkspaceLength } from '../../common/name-fields';

export class NodeRefDto {
  @ApiProperty({ example: 'platform/network' })
  @IsString()
  @UnitNameLength()
  unit!: string;

  @ApiPropertyOptional({ example: 'default', description: 'Workspace (default `default`)' })
  @IsOptional()
  @IsString()
  @WorkspaceLength()
  workspace?: string;
}

export class DeclareEdgeDto {
  @ApiProperty({ type: NodeRefDto, description: 'The state whose outputs are read' })
  @IsDefined()
  @IsObject()
  @ValidateNested()
  @Type(() => NodeRefDto)
  producer!: NodeRefDto;

  @ApiProperty({ type: NodeRefDto, description: 'The state that reads them' })
  @IsDefined()
  @IsObject()
  @ValidateNested()
  @Type(() => NodeRefDto)
  consumer!: NodeRefDto;

  @ApiPropertyOptional({
    example: 'network',
    description: 'A label for the edge, unique per producer and consumer (default `declared`)',
  })
  @IsOptional()
  @IsString()
  @MaxLength(128)
  name?: string;

  @ApiPropertyOptional({
    type: [String],
    example: ['vpc_id', 'subnet_ids'],
    description: 'Only these outputs of the producer matter (default: every output)',
  })
  @IsOptional()
  @IsArray()
  @ArrayMaxSize(100)
  @IsString({ each: true })
  outputs?: string[];

  @ApiPropertyOptional({
    example: 'vpc_id',
    description: 'As which input (variable) of the consumer',
  })
  @IsOptional()
  @IsString()
  @MaxLength(128)
  input?: string;
}

export class GraphQuery {
  @ApiPropertyOptional({
    example: 'team-a/',
    description: 'Only edges with an end whose unit starts with this',
  })
  @IsOptional()
  @IsString()
  @UnitNameLength()
  @Matches(/^[A-Za-z0-9._/-]*$/, { message: 'prefix may only contain letters, digits and . _ - /' })
  prefix?: string;

  @ApiPropertyOptional({ enum: ['json', 'dot', 'mermaid'], description: 'Default json' })
  @IsOptional()
  @IsIn(['json', 'dot', 'mermaid'])
  format?: 'json' | 'dot' | 'mermaid';
}

export class StaleQuery {
  @ApiPropertyOptional({
    example: 'team-a/',
    description: 'Only states whose unit starts with this',
  })
  @IsOptional()
  @IsString()
  @UnitNameLength()
  @Matches(/^[A-Za-z0-9._/-]*$/, { message: 'prefix may only contain letters, digits and . _ - /' })
  prefix?: string;
}

// ------------------------------------------------------------------ answers

export class NodeRefView {
  @ApiProperty()
  unit!: string;
  @ApiProperty()
  workspace!: string;
}

export class EdgeViewDoc {
  @ApiProperty({ format: 'uuid' })
  id!: string;
  @ApiProperty({ type: NodeRefView })
  producer!: NodeRefView;
  @ApiProperty({ type: NodeRefView })
  consumer!: NodeRefView;
  @ApiProperty({ enum: ['declared', 'discovered'] })
  source!: string;
  @ApiProperty({
    description: 'The terraform_remote_state data source (discovered) or the label (declared)',
  })
  name!: string;
  @ApiPropertyOptional({
    type: [String],
    nullable: true,
    description: 'Declared: the outputs that matter',
  })
  outputs!: string[] | null;
  @ApiPropertyOptional({ type: String, nullable: true })
  input!: string | null;
  @ApiProperty({
    enum: ['ok', 'stale', 'unknown'],
    description:
      'ok: what the consumer read is current; stale: an output changed since; unknown: the producer has no current state',
  })
  status!: string;
  @ApiProperty({ type: [String], description: 'Outputs that changed since the consumer read them' })
  changed!: string[];
  @ApiPropertyOptional({
    type: Number,
    nullable: true,
    description: 'The producer version whose outputs the consumer read',
  })
  producerVersion!: number | null;
  @ApiProperty({
    enum: ['compared', 'excluded'],
    description:
      'excluded: the edge’s author (the consumer’s writer, or who declared it) may not read the producer’s sensitive outputs, so the edge is judged on its other outputs only — a sensitive output never changes its status, producer version or staleSince',
  })
  sensitiveOutputs!: string;
  @ApiProperty()
  recordedAt!: string;
}

export class GraphNodeView extends NodeRefView {
  @ApiProperty({ enum: ['green', 'red', 'yellow'] })
  status!: string;
  @ApiPropertyOptional({ type: Number, nullable: true, description: 'Current version' })
  version!: number | null;
}

export class GraphViewDoc {
  @ApiProperty({ type: [GraphNodeView] })
  nodes!: GraphNodeView[];
  @ApiProperty({ type: [EdgeViewDoc] })
  edges!: EdgeViewDoc[];
  @ApiProperty({
    type: 'array',
    items: { type: 'array', items: { $ref: '#/components/schemas/NodeRefView' } },
    description: 'Dependency cycles (reported, not followed)',
  })
  cycles!: NodeRefView[][];
}

export class InputViewDoc {
  @ApiPropertyOptional({
    type: String,
    nullable: true,
    description: 'null when the producer is hidden',
  })
  edge!: string | null;
  @ApiProperty({
    description: 'The producer, or `{"hidden": true}` for one the caller may not see',
    example: { unit: 'platform/network', workspace: 'default' },
  })
  producer!: object;
  @ApiProperty({ enum: ['declared', 'discovered'] })
  source!: string;
  @ApiPropertyOptional({ type: String, nullable: true })
  name!: string | null;
  @ApiProperty({ enum: ['ok', 'stale', 'unknown'] })
  status!: string;
  @ApiProperty({ type: [String] })
  changed!: string[];
  @ApiPropertyOptional({
    type: Number,
    nullable: true,
    description: 'Stale: the first producer version whose outputs differ from what was read',
  })
  staleSince!: number | null;
  @ApiProperty({
    enum: ['compared', 'excluded'],
    description:
      'excluded: the edge’s author (the consumer’s writer, or who declared it) may not read the producer’s sensitive outputs, so the edge is judged on its other outputs only — a sensitive output never changes its status, producer version or staleSince',
  })
  sensitiveOutputs!: string;
}

export class UnitStatusViewDoc extends NodeRefView {
  @ApiProperty({
    enum: ['green', 'red', 'yellow'],
    description:
      'green: every input current; red: an input is stale; yellow: something upstream is red',
  })
  status!: string;
  @ApiProperty({ type: [InputViewDoc] })
  inputs!: InputViewDoc[];
  @ApiProperty({ type: [NodeRefView], description: 'Yellow: the red states upstream' })
  redUpstream!: NodeRefView[];
  @ApiProperty({ description: 'Yellow: red states upstream the caller may not see' })
  hiddenRedUpstream!: number;
  @ApiProperty({
    type: 'array',
    items: { type: 'array', items: { $ref: '#/components/schemas/NodeRefView' } },
  })
  cycles!: NodeRefView[][];
}

export class StaleItemViewDoc extends NodeRefView {
  @ApiProperty({ enum: ['red', 'yellow'] })
  status!: string;
  @ApiProperty({ type: [InputViewDoc], description: 'Red: the stale inputs' })
  inputs!: InputViewDoc[];
}

export class StaleViewDoc {
  @ApiProperty({ type: [StaleItemViewDoc], description: 'In dependency order: producers first' })
  items!: StaleItemViewDoc[];
  @ApiProperty({
    type: 'array',
    items: { type: 'array', items: { $ref: '#/components/schemas/NodeRefView' } },
  })
  cycles!: NodeRefView[][];
}
