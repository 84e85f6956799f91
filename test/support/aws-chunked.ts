import { AwsChunkedOptions, AwsChunkedParser } from '../../src/s3compat/aws-chunked';
import { S3Error } from '../../src/s3compat/s3-errors';

/** Feeds `pieces` to a fresh parser; returns the decoded bytes and trailers, or the S3 error. */
export function decodeAwsChunked(
  opts: AwsChunkedOptions,
  pieces: Buffer[],
): { data?: Buffer; trailers?: Record<string, string>; error?: S3Error } {
  const p = new AwsChunkedParser(opts);
  const out: Buffer[] = [];
  try {
    for (const piece of pieces) for (const d of p.push(piece)) out.push(Buffer.from(d));
    const trailers = p.end();
    return { data: Buffer.concat(out), trailers: { ...trailers } };
  } catch (e) {
    if (!(e instanceof S3Error)) throw e;
    return { error: e };
  }
}
