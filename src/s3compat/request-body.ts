import type { Transform } from 'node:stream';
import { AwsChunkedDecoder, AwsChunkedOptions, awsChunkedOptionsFromRequest } from './aws-chunked';
import {
  BodyVerifier,
  BodyVerifierOptions,
  checksumHeaderName,
  integrityFromHeaders,
} from './checksums';
import type { SigningContext } from './sigv4';
import { HeaderMap, Result, ok } from './wire';

/**
 * How to read the body of a verified S3 request, in one place: whether it is aws-chunked (and
 * how to decode it) and what it must hash to. Pure; the door does the streaming:
 *
 *   const plan = planRequestBody(req.headersDistinct, verified.value);     // Result
 *   if (!plan.ok) throw plan.error;
 *   const { transforms, verifier } = bodyTransforms(plan.value);
 *   await pipeline(req, ...transforms, sink);   // sink must discard everything on error
 *   verifier.digests  // length, md5 (ETag), checksums — set when the body verified
 *
 * The stored bytes are the decoded bytes; Content-Encoding `aws-chunked` is not part of the
 * object. A plain body declared by hex x-amz-content-sha256 is checked against it
 * (XAmzContentSHA256Mismatch); Content-MD5 and x-amz-checksum-* (header or trailer) → BadDigest.
 */
export interface RequestBodyPlan {
  /** Present when the body is aws-chunked. */
  chunked?: AwsChunkedOptions;
  integrity: BodyVerifierOptions;
}

export function planRequestBody(
  headers: HeaderMap,
  context: SigningContext,
  extra: { computeChecksums?: BodyVerifierOptions['computeChecksums'] } = {},
): Result<RequestBodyPlan> {
  const chunked = awsChunkedOptionsFromRequest(headers, context);
  if (!chunked.ok) return chunked;
  const integrity = integrityFromHeaders(headers, {
    contentSha256Hex: context.payload.kind === 'sha256' ? context.payload.hex : undefined,
    trailerNames: chunked.value?.declaredTrailers ?? [],
  });
  if (!integrity.ok) return integrity;
  return ok({
    chunked: chunked.value,
    integrity: { ...integrity.value, computeChecksums: extra.computeChecksums },
  });
}

export function bodyTransforms(plan: RequestBodyPlan): {
  transforms: Transform[];
  verifier: BodyVerifier;
  decoder: AwsChunkedDecoder | undefined;
} {
  const decoder = plan.chunked ? new AwsChunkedDecoder(plan.chunked) : undefined;
  const checksum = plan.integrity.checksum;
  const verifier = new BodyVerifier({
    ...plan.integrity,
    resolveChecksumValue:
      checksum?.source === 'trailer'
        ? () => decoder?.trailers?.[checksumHeaderName(checksum.algorithm)]
        : undefined,
  });
  return { transforms: decoder ? [decoder, verifier] : [verifier], verifier, decoder };
}
