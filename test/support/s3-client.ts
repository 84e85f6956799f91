import { S3Client } from '@aws-sdk/client-s3';
import { S3Creds } from './s3-signer';

/**
 * An AWS SDK S3 client for the server's `/s3` door with these credentials: path-style,
 * us-east-1, one attempt (no retries, so a test sees the first answer).
 */
export function s3ClientFor(server: { url: string }, creds: S3Creds): S3Client {
  return new S3Client({
    endpoint: `${server.url}/s3`,
    forcePathStyle: true,
    region: 'us-east-1',
    maxAttempts: 1,
    credentials: {
      accessKeyId: creds.AccessKeyId,
      secretAccessKey: creds.SecretAccessKey,
      sessionToken: creds.SessionToken,
    },
  });
}
