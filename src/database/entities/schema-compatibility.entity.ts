import { Check, Column, Entity, PrimaryColumn } from 'typeorm';

/**
 * The schema's compatibility record, one row (src/database/schema-compat.ts). Levels are
 * migration timestamps; `bigint` columns come back as strings.
 */
@Entity({ name: 'schema_compatibility' })
@Check('ck_schema_compatibility_one_row', `"id" = 1`)
export class SchemaCompatibilityEntity {
  @PrimaryColumn({
    type: 'smallint',
    default: 1,
    primaryKeyConstraintName: 'pk_schema_compatibility',
  })
  id!: number;

  /** The newest migration applied. */
  @Column({ name: 'schema_level', type: 'bigint' })
  schemaLevel!: string;

  /** The oldest code level that still works with this schema. */
  @Column({ name: 'oldest_code_level', type: 'bigint' })
  oldestCodeLevel!: string;

  /** The release (package version) that last applied migrations. */
  @Column({ name: 'migrated_by', type: 'text' })
  migratedBy!: string;

  @Column({ name: 'migrated_at', type: 'timestamptz', default: () => 'now()' })
  migratedAt!: Date;
}
