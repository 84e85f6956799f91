import { createHash, Hash } from 'node:crypto';
import { Transform, TransformCallback } from 'node:stream';
import { DomainError } from '../common/errors';
import type { DigestKeys } from './output-digests';
import { InspectedState, InvalidStateError, StateInspector } from './state-inspector';

/**
 * Sits between the request and the blob store: passes bytes through unchanged while counting
 * them, hashing them (sha256 for identity, md5 for Content-MD5 and S3 ETags) and inspecting
 * them as a state. It fails the stream — so the blob store keeps nothing — as soon as the body
 * is too large or cannot be a state. The body is never held whole.
 */
export class StateIngest extends Transform {
  private readonly sha256: Hash = createHash('sha256');
  private readonly md5: Hash = createHash('md5');
  private readonly inspector: StateInspector;
  private bytes = 0;
  private outcome?: { inspected: InspectedState; sha256: string; md5: string; size: number };

  /**
   * `digestKey`: the graph digest key, for the digests of what `terraform_remote_state` data
   * sources read. `onBytes` sees each chunk's size before it is inspected (the server-wide
   * inspection budget); it may throw to refuse the body.
   */
  constructor(
    private readonly maxBytes: number,
    options: {
      digestKey?: Buffer | DigestKeys;
      onBytes?: (n: number) => void;
      verify?: (digest: BodyDigest) => void;
    } = {},
  ) {
    super();
    this.inspector = new StateInspector({ digestKey: options.digestKey });
    this.onBytes = options.onBytes;
    this.verify = options.verify;
  }

  private readonly onBytes?: (n: number) => void;
  /**
   * Checks of the whole body's digests (the S3 door's declared payload hash and checksums),
   * at its end and before the end of the inspection: they refuse it first, as when the door
   * hashed the body itself on its way here. It may throw to refuse the body.
   */
  private readonly verify?: (digest: BodyDigest) => void;

  override _transform(chunk: Buffer, _enc: BufferEncoding, done: TransformCallback): void {
    this.bytes += chunk.length;
    if (this.bytes > this.maxBytes) {
      done(tooLarge(this.maxBytes));
      return;
    }
    try {
      this.onBytes?.(chunk.length);
      this.inspector.write(chunk);
    } catch (e) {
      done(asStateError(e));
      return;
    }
    this.sha256.update(chunk);
    this.md5.update(chunk);
    done(null, chunk);
  }

  override _flush(done: TransformCallback): void {
    try {
      const digest = {
        sha256: this.sha256.digest('hex'),
        md5: this.md5.digest('hex'),
        size: this.bytes,
      };
      this.verify?.(digest);
      this.outcome = { inspected: this.inspector.end(), ...digest };
      done();
    } catch (e) {
      done(asStateError(e));
    }
  }

  /** Available once the stream has finished without error. */
  result(): { inspected: InspectedState; sha256: string; md5: string; size: number } {
    if (!this.outcome) throw new Error('state ingest has not finished');
    return this.outcome;
  }
}

/** A whole body's size and digests (hex). */
export interface BodyDigest {
  sha256: string;
  md5: string;
  size: number;
}

export function tooLarge(maxBytes: number): DomainError {
  return new DomainError(
    'too_large',
    `state is larger than the limit of ${maxBytes} bytes (STATEHOUSE_MAX_STATE_BYTES)`,
  );
}

function asStateError(e: unknown): Error {
  if (e instanceof InvalidStateError && e.limit) {
    return new DomainError('invalid_state', `state refused: ${e.message}`);
  }
  if (e instanceof InvalidStateError) {
    return new DomainError(
      'invalid_state',
      `not a Terraform v4 state or an OpenTofu encrypted state: ${e.message}`,
    );
  }
  return e as Error;
}
