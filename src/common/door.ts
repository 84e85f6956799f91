/**
 * The ways into the server: the S3 door, Terraform's HTTP backend, the management API, and the
 * TFE API (`cloud {}`, `backend "remote"`).
 */
export type Door = 'http' | 's3' | 'api' | 'tfe';

/** Where an audited event came from: a door, the command line, or the server itself. */
export type AuditDoor = Door | 'cli' | 'system';
