import { execFileSync } from 'node:child_process';
import { join } from 'node:path';

/** A self-signed P-256 certificate for `dnsName` (openssl), valid one day: `<name>.crt` / `.key`. */
export function selfSignedCertificate(
  dir: string,
  name: string,
  dnsName: string,
): { cert: string; key: string } {
  const cert = join(dir, `${name}.crt`);
  const key = join(dir, `${name}.key`);
  execFileSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:prime256v1',
      '-nodes',
      '-keyout',
      key,
      '-out',
      cert,
      '-days',
      '1',
      '-subj',
      `/CN=${dnsName}`,
      '-addext',
      `subjectAltName=DNS:${dnsName}`,
    ],
    { stdio: 'ignore' },
  );
  return { cert, key };
}
