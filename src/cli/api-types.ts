/**
 * The management API's answers as the CLI reads them (see openapi/openapi.json). Kept apart
 * from the server's view classes: the CLI is a client of the HTTP contract, not of the code.
 */

export interface AuthConfig {
  issuer: string | null;
  client_id: string | null;
  scopes: string[];
  public_url: string;
}

export interface TokenResponse {
  access_token: string;
  refresh_token: string;
  token_type: string;
  expires_in: number;
}

export interface ProcessCredentials {
  Version: number;
  AccessKeyId: string;
  SecretAccessKey: string;
  SessionToken: string;
  Expiration: string;
}

export interface Me {
  subject: string;
  kind: string;
  via: string;
  email?: string;
  groups?: string[];
}

export interface ApiToken {
  id: string;
  name: string;
  subject: string;
  createdBy: string;
  createdAt: string;
  expiresAt?: string | null;
  lastUsedAt?: string | null;
  revokedAt?: string | null;
}

export interface CreatedApiToken extends ApiToken {
  token: string;
}

export interface Unit {
  name: string;
  createdAt: string;
  createdBy: string;
  deletedAt?: string | null;
}

export interface Workspace {
  workspace: string;
  currentVersion?: number | null;
  serial?: number | null;
  size?: number | null;
  updatedAt?: string | null;
  deleted: boolean;
  locked: boolean;
}

export interface UnitDetail extends Unit {
  workspaces: Workspace[];
}

export interface Page<T> {
  items: T[];
  nextCursor?: string | null;
}

export interface Version {
  version: number;
  serial?: number | null;
  lineage?: string | null;
  terraformVersion?: string | null;
  encrypted: boolean;
  sha256: string;
  md5: string;
  size: number;
  createdAt: string;
  createdBy: string;
  door: string;
  restoredFrom?: number | null;
}

export interface WriteResult {
  created: boolean;
  version: Version;
}

export interface Lock {
  unit: string;
  workspace: string;
  id: string;
  info: Record<string, unknown>;
  principal: string;
  createdAt: string;
  ageSeconds: number;
}

export interface ForceUnlockResult {
  released: boolean;
  lock?: Lock | null;
}

/** The JSON error body of the management API. */
export interface ErrorBody {
  statusCode?: number;
  code?: string;
  message?: string;
  lock?: Record<string, unknown>;
  lockHolder?: string;
}

// /v1/rbac

export interface RbacRule {
  effect: string;
  actions: string[];
  resources: string[];
  workspaces?: string[] | null;
}

export interface RbacPermission {
  id: string;
  name: string;
  description: string;
  created_at: string;
  rules: RbacRule[];
}

export interface RbacRole {
  id: string;
  name: string;
  description: string;
  created_at: string;
  permissions: string[];
}

export interface RbacAssignment {
  id: string;
  role_id: string;
  role: string;
  subject_type: string;
  subject_value: string;
  created_at: string;
  created_by: string;
}

export interface RbacStatus {
  initialised: boolean;
  mode: string;
}

export interface RbacMe {
  subject: string;
  email: string | null;
  groups: string[];
  initialised: boolean;
  breakGlass: boolean;
  roles: string[];
  rules: (RbacRule & { role: string; permission: string })[];
}

export interface RbacTestResult {
  allowed: boolean;
  reason: 'bootstrap' | 'not-initialised' | 'rule' | 'no-matching-rule';
  rule?: RbacRule & { id: string; source?: string };
}
