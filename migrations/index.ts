import { CoreSchema1764480000000 } from './1764480000000-core-schema';
import { Identity1764500000000 } from './1764500000000-identity';
import { S3Multipart1764520000000 } from './1764520000000-s3-multipart';
import { RbacAudit1764540000000 } from './1764540000000-rbac-audit';
import { Graph1764560000000 } from './1764560000000-graph';
import { S3UsedSignatures1764580000000 } from './1764580000000-s3-used-signatures';
import { OutputDigestsV21764600000000 } from './1764600000000-output-digests-v2';
import { OutputsJson1764620000000 } from './1764620000000-outputs-json';
import { CredentialLineage1764640000000 } from './1764640000000-credential-lineage';
import { S3Buckets1764660000000 } from './1764660000000-s3-buckets';
import { SchemaCompatibility1764680000000 } from './1764680000000-schema-compatibility';
import { Tfe1764700000000 } from './1764700000000-tfe';
import { TerraformLogin1764720000000 } from './1764720000000-terraform-login';
import { LeveledMigration, levelOf } from '../src/database/schema-compat';

/**
 * Every migration, in order. Applied at start under an advisory lock and by `statehouse migrate`.
 * Expand, then contract in a later release: a migration that drops, renames or retypes what
 * older code uses declares `contractFloor` (src/database/schema-compat.ts; the rule test
 * test/unit/migration-rules.spec.ts keeps every migration to it).
 */
export const MIGRATIONS: (new () => LeveledMigration)[] = [
  CoreSchema1764480000000,
  Identity1764500000000,
  S3Multipart1764520000000,
  RbacAudit1764540000000,
  Graph1764560000000,
  S3UsedSignatures1764580000000,
  OutputDigestsV21764600000000,
  OutputsJson1764620000000,
  CredentialLineage1764640000000,
  S3Buckets1764660000000,
  SchemaCompatibility1764680000000,
  Tfe1764700000000,
  TerraformLogin1764720000000,
];

/** This code's schema level: its newest migration's timestamp. */
export const SCHEMA_LEVEL = levelOf(MIGRATIONS[MIGRATIONS.length - 1].name);
