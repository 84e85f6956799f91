import { ApiTokenEntity } from './auth/entities/api-token.entity';
import { CredentialRevocationEntity } from './auth/entities/credential-revocation.entity';
import { LoginIdentityEntity } from './auth/entities/login-identity.entity';
import { RefreshTokenEntity } from './auth/entities/refresh-token.entity';
import { SigningKeyEntity } from './auth/entities/signing-key.entity';
import { S3UploadEntity, S3UploadPartEntity } from './s3compat/entities/s3-upload.entity';
import { S3BucketEntity } from './s3compat/entities/s3-bucket.entity';
import { S3UsedSignatureEntity } from './s3compat/entities/s3-used-signature.entity';
import { AuditEventEntity } from './audit/entities/audit-event.entity';
import {
  RbacAssignmentEntity,
  RbacPermissionEntity,
  RbacRoleEntity,
  RbacRolePermissionEntity,
  RbacRuleEntity,
} from './rbac/entities/rbac.entities';
import { GraphEdgeEntity } from './graph/entities/graph-edge.entity';
import { LockEntity } from './state/locks/entities/lock.entity';
import { StateEntity } from './state/entities/state.entity';
import { UnitEntity } from './state/entities/unit.entity';
import { VersionEntity } from './state/entities/version.entity';
import { BlobChunkEntity } from './storage/entities/blob-chunk.entity';
import { SchemaCompatibilityEntity } from './database/entities/schema-compatibility.entity';
import { SettingEntity } from './database/entities/setting.entity';
import { TfeProjectEntity } from './tfe/entities/tfe-project.entity';
import { TfeStateUploadEntity } from './tfe/entities/tfe-state-upload.entity';
import { TerraformLoginEntity } from './tfe/entities/terraform-login.entity';
import { TfeWorkspaceEntity } from './tfe/entities/tfe-workspace.entity';

/**
 * Every table the migrations create; the schema check compares the two. The root hands this
 * list to the database layer (DatabaseModule.forRoot, createDataSource), which imports no
 * feature module.
 */
export const ENTITIES = [
  UnitEntity,
  StateEntity,
  VersionEntity,
  LockEntity,
  SettingEntity,
  SchemaCompatibilityEntity,
  BlobChunkEntity,
  SigningKeyEntity,
  RefreshTokenEntity,
  ApiTokenEntity,
  CredentialRevocationEntity,
  LoginIdentityEntity,
  S3UploadEntity,
  S3UploadPartEntity,
  S3UsedSignatureEntity,
  S3BucketEntity,
  RbacPermissionEntity,
  RbacRuleEntity,
  RbacRoleEntity,
  RbacRolePermissionEntity,
  RbacAssignmentEntity,
  AuditEventEntity,
  GraphEdgeEntity,
  TfeWorkspaceEntity,
  TfeProjectEntity,
  TfeStateUploadEntity,
  TerraformLoginEntity,
];
