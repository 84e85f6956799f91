import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';

/**
 * STS-style S3 credentials without a session table. The access key id carries the key id of
 * the HMAC secret and a random session id; the secret access key is an HMAC of the session id,
 * so any replica holding the HMAC secrets re-derives it from the access key id alone.
 *
 *   AccessKeyId     = "SH" + <kid: 1-8 of [A-Z0-9]> + <session id: 26 of [A-Z2-7]>
 *   SecretAccessKey = base64url(HMAC-SHA256(hmac[kid], "statehouse-sts-v1:" + session id))
 */
export const ACCESS_KEY_PREFIX = 'SH';
const SESSION_ID_LENGTH = 26; // 130 bits of base32: 16 random bytes
const BASE32 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567';

export function newSessionId(): string {
  const bytes = randomBytes(17);
  let bits = 0;
  let value = 0;
  let out = '';
  for (const b of bytes) {
    value = (value << 8) | b;
    bits += 8;
    while (bits >= 5 && out.length < SESSION_ID_LENGTH) {
      out += BASE32[(value >>> (bits - 5)) & 31];
      bits -= 5;
    }
  }
  return out;
}

export function accessKeyId(kid: string, sessionId: string): string {
  return `${ACCESS_KEY_PREFIX}${kid}${sessionId}`;
}

/** Splits an access key id into key id and session id; undefined when it is not one of ours. */
export function parseAccessKeyId(id: string): { kid: string; sessionId: string } | undefined {
  const m = /^SH([A-Z0-9]{1,8})([A-Z2-7]{26})$/.exec(id);
  return m ? { kid: m[1], sessionId: m[2] } : undefined;
}

export function deriveSecretAccessKey(hmacKey: Buffer, sessionId: string): string {
  return createHmac('sha256', hmacKey).update(`statehouse-sts-v1:${sessionId}`).digest('base64url');
}

/** Constant-time comparison of two secrets of any length. */
export function secretsEqual(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

/** The AWS `credential_process` output. */
export interface ProcessCredentials {
  Version: 1;
  AccessKeyId: string;
  SecretAccessKey: string;
  SessionToken: string;
  Expiration: string;
}
