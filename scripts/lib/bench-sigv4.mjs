// SigV4 signing for the benchmark clients (S3, us-east-1 unless told otherwise): header signing as
// Terraform's S3 backend does it over http, and presigned URLs (query signing) for load
// generators that cannot sign each request themselves (wrk). Node built-ins only.
import { createHash, createHmac } from 'node:crypto';

const sha256Hex = (data) => createHash('sha256').update(data).digest('hex');
const hmac = (key, data) => createHmac('sha256', key).update(data).digest();

/** `YYYYMMDDTHHMMSSZ` for now. */
const amzNow = () =>
  new Date()
    .toISOString()
    .replace(/[-:]/g, '')
    .replace(/\.\d{3}/, '');

/** RFC 3986 encoding, as SigV4 wants it in a canonical query string. */
const rfc3986 = (s) =>
  encodeURIComponent(s).replace(
    /[!'()*]/g,
    (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`,
  );

/**
 * A signer for one set of credentials `{ accessKeyId, secretAccessKey, sessionToken? }`. Paths are
 * used exactly as given (S3's canonical URI is the raw path).
 */
export function sigv4Signer(creds, region = 'us-east-1', service = 's3') {
  let cached = { date: '', key: undefined };
  const keyFor = (date) => {
    if (cached.date !== date) {
      const kService = hmac(hmac(hmac(`AWS4${creds.secretAccessKey}`, date), region), service);
      cached = { date, key: hmac(kService, 'aws4_request') };
    }
    return cached.key;
  };
  const sign = (amzDate, canonicalRequest) => {
    const date = amzDate.slice(0, 8);
    const scope = `${date}/${region}/${service}/aws4_request`;
    const toSign = ['AWS4-HMAC-SHA256', amzDate, scope, sha256Hex(canonicalRequest)].join('\n');
    return { scope, signature: createHmac('sha256', keyFor(date)).update(toSign).digest('hex') };
  };

  return {
    /** Headers of a header-signed request without query string. */
    headers(method, host, path, payloadHash) {
      const amzDate = amzNow();
      const token = creds.sessionToken;
      const names = `host;x-amz-content-sha256;x-amz-date${token ? ';x-amz-security-token' : ''}`;
      const canonical = [
        method,
        path,
        '',
        `host:${host}\nx-amz-content-sha256:${payloadHash}\nx-amz-date:${amzDate}\n` +
          (token ? `x-amz-security-token:${token}\n` : ''),
        names,
        payloadHash,
      ].join('\n');
      const { scope, signature } = sign(amzDate, canonical);
      return {
        Host: host,
        'X-Amz-Content-Sha256': payloadHash,
        'X-Amz-Date': amzDate,
        ...(token ? { 'X-Amz-Security-Token': token } : {}),
        Authorization: `AWS4-HMAC-SHA256 Credential=${creds.accessKeyId}/${scope}, SignedHeaders=${names}, Signature=${signature}`,
      };
    },

    /** A presigned URL (`origin` like http://127.0.0.1:8080) valid for `expiresSeconds`. */
    presign(method, origin, path, expiresSeconds = 3600) {
      const amzDate = amzNow();
      const host = new URL(origin).host;
      const scope = `${amzDate.slice(0, 8)}/${region}/${service}/aws4_request`;
      const params = {
        'X-Amz-Algorithm': 'AWS4-HMAC-SHA256',
        'X-Amz-Credential': `${creds.accessKeyId}/${scope}`,
        'X-Amz-Date': amzDate,
        'X-Amz-Expires': String(expiresSeconds),
        ...(creds.sessionToken ? { 'X-Amz-Security-Token': creds.sessionToken } : {}),
        'X-Amz-SignedHeaders': 'host',
      };
      const query = Object.keys(params)
        .sort()
        .map((k) => `${rfc3986(k)}=${rfc3986(params[k])}`)
        .join('&');
      const canonical = [method, path, query, `host:${host}\n`, 'host', 'UNSIGNED-PAYLOAD'].join(
        '\n',
      );
      const { signature } = sign(amzDate, canonical);
      return `${origin}${path}?${query}&X-Amz-Signature=${signature}`;
    },
  };
}

export { sha256Hex };
