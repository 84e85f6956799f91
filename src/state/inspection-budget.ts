import { Inject, Injectable } from '@nestjs/common';
import { DomainError } from '../common/errors';
import { APP_CONFIG, AppConfig } from '../config/config';

/** How long a write waits for room before it is refused (503, `Retry-After`). */
export const INSPECTION_WAIT_MS = 30_000;

/** A share of the budget, held while one state is inspected and written. */
export interface InspectionLease {
  /** `n` more bytes arrived: taken from the reservation, or from what is free now (else 503). */
  use(n: number): void;
  /** Gives everything back; any later call is a no-op. */
  release(): void;
}

export function slowDown(limitBytes: number): DomainError {
  return new DomainError(
    'slow_down',
    `the server is already inspecting as many state bytes as it may at once (${limitBytes} bytes, STATEHOUSE_INSPECTION_MAX_BYTES); try again in a few seconds`,
  );
}

/**
 * Bounds the bytes of state bodies being inspected at once, server-wide (per replica). The
 * memory a write takes grows with its body at most linearly (streamed: the inspector keeps
 * small values, the top-level outputs up to their own limit, and capped remote-state facts), so
 * this bounds the memory of all writes together whatever their number and shape.
 *
 * A write reserves its declared length before its body is read; one of unknown length takes
 * bytes as they arrive. A write that does not fit waits, first come first served, in a queue of
 * at most `queue` writes, for at most INSPECTION_WAIT_MS; beyond either it is refused with
 * `slow_down` (503 with `Retry-After`; S3 `SlowDown`, which S3 clients retry). Bytes a
 * write of unknown length needs beyond what is free are refused at once rather than waited for:
 * two such writes waiting for each other would never finish.
 */
export class ByteBudget {
  private used = 0;
  private readonly waiting: { need: number; grant: () => void; timer: NodeJS.Timeout }[] = [];

  constructor(
    readonly limit: number,
    private readonly queue: number,
    private readonly waitMs = INSPECTION_WAIT_MS,
  ) {}

  /** Bytes currently held (for tests and metrics). */
  get inUse(): number {
    return this.used;
  }

  /** A lease of `reserve` bytes (0 when the length is unknown), once they are free. */
  async acquire(reserve: number): Promise<InspectionLease> {
    const need = Math.min(Math.max(0, reserve), this.limit);
    if (this.waiting.length === 0 && this.used + need <= this.limit) {
      this.used += need;
      return this.lease(need);
    }
    if (this.waiting.length >= this.queue) throw slowDown(this.limit);
    await new Promise<void>((resolve, reject) => {
      const entry = {
        need,
        grant: () => {
          clearTimeout(entry.timer);
          resolve();
        },
        timer: setTimeout(() => {
          const at = this.waiting.indexOf(entry);
          if (at >= 0) this.waiting.splice(at, 1);
          reject(slowDown(this.limit));
          this.admit(); // the one behind it may fit
        }, this.waitMs),
      };
      this.waiting.push(entry);
    });
    return this.lease(need);
  }

  private lease(reserved: number): InspectionLease {
    let held = reserved;
    let seen = 0;
    let released = false;
    return {
      use: (n: number) => {
        if (released) return;
        const more = seen + n - held;
        if (more > 0 && this.used + more > this.limit) throw slowDown(this.limit);
        seen += n;
        if (more <= 0) return;
        this.used += more;
        held += more;
      },
      release: () => {
        if (released) return;
        released = true;
        this.used -= held;
        this.admit();
      },
    };
  }

  /** Lets in the waiting writes that now fit, in order. */
  private admit(): void {
    while (this.waiting.length > 0 && this.used + this.waiting[0].need <= this.limit) {
      const next = this.waiting.shift()!;
      this.used += next.need;
      next.grant();
    }
  }
}

/** The server's one inspection budget (STATEHOUSE_INSPECTION_MAX_BYTES, _QUEUE). */
@Injectable()
export class InspectionBudget extends ByteBudget {
  constructor(@Inject(APP_CONFIG) config: AppConfig) {
    super(config.inspection.maxBytes, config.inspection.queue);
  }
}
