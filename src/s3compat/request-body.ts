import type { IncomingMessage } from 'node:http';
import type { Readable, Transform } from 'node:stream';
import { AwsChunkedDecoder, AwsChunkedOptions, awsChunkedOptionsFromRequest } from './aws-chunked';
import {
  BodyVerifier,
  BodyVerifierOptions,
  checksumHeaderName,
  integrityFromHeaders,
} from './checksums';
import { describeS3Request } from './s3-headers';
import { decodedBody } from './s3-request';
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

/** A request body, decoded (aws-chunked) and checked (payload hash, checksums, Content-MD5 when `md5`). */
export interface OpenedRequestBody {
  stream: Readable;
  verifier: ReturnType<typeof bodyTransforms>['verifier'];
  /** The decoded length the client declared, when it declared a valid one. */
  declaredLength: number | undefined;
}

/**
 * Opens the body of an S3 request: planned from its headers once, decoded and checked as it
 * streams. `hashedDownstream`: the consumer computes the body's SHA-256 and MD5 and hands them
 * to `verifier.check` at the end (see `BodyVerifierOptions`).
 */
export function openRequestBody(
  req: IncomingMessage,
  signing: SigningContext,
  md5: boolean,
  hashedDownstream = false,
): OpenedRequestBody {
  const head = describeS3Request(req);
  const plan = planRequestBody(head.lines, signing);
  if (!plan.ok) throw plan.error;
  const { transforms, verifier } = bodyTransforms({
    ...plan.value,
    integrity: { ...plan.value.integrity, md5, hashedDownstream },
  });
  return {
    stream: decodedBody(req, transforms),
    verifier,
    declaredLength: head.declaredLength,
  };
}

/**
 * The body of a PutObject of a state: decoded and checked like any body, its SHA-256 and MD5
 * left to the state writer, which hashes every byte it stores; `verify` (the writer's
 * `WriteRequest.verify`) checks every declaration against those digests as the body ends.
 */
export function openStateBody(
  req: IncomingMessage,
  signing: SigningContext,
): OpenedRequestBody & { verify: (digest: { sha256: string; md5: string }) => void } {
  const body = openRequestBody(req, signing, false, true);
  return {
    ...body,
    verify: (digest) => {
      const mismatch = body.verifier.check(digest);
      if (mismatch) throw mismatch;
    },
  };
}
