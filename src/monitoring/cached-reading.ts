export interface CachedReadingOptions {
  /** A reading this recent is used as it is: scrapes within it cause no read. */
  freshMs: number;
  /** A scrape waits this long for a read; a slower one goes on, for the next scrape. */
  waitMs: number;
  /** A reading older than this is not shown at all (the value is unknown, not stale). */
  staleMs: number;
}

/**
 * A value read from elsewhere (the database) for metrics scrapes: read at most once per
 * `freshMs` however many scrapes come, one read at a time, never waiting long. A failed or slow
 * read leaves the previous reading in place until it is `staleMs` old; after that there is no
 * value, so a dashboard shows a gap rather than a number that may be wrong.
 */
export class CachedReading<T> {
  private last?: { value: T; at: number };
  private triedAt = -Infinity;
  private reading?: Promise<void>;

  constructor(
    private readonly read: () => Promise<T>,
    private readonly options: CachedReadingOptions,
    private readonly onError: (e: unknown) => void,
    private readonly now: () => number = Date.now,
  ) {}

  /** The latest reading and when it was taken, or undefined when there is none recent enough. */
  async get(): Promise<{ value: T; at: number } | undefined> {
    if (!this.reading && this.now() - this.triedAt >= this.options.freshMs) {
      this.triedAt = this.now();
      this.reading = this.refresh().finally(() => (this.reading = undefined));
    }
    if (this.reading) await this.waitAtMost(this.reading, this.options.waitMs);
    const last = this.last;
    return last && this.now() - last.at <= this.options.staleMs ? last : undefined;
  }

  private async refresh(): Promise<void> {
    try {
      const value = await this.read();
      this.last = { value, at: this.now() };
    } catch (e) {
      this.onError(e);
    }
  }

  private async waitAtMost(work: Promise<void>, ms: number): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<void>((resolve) => (timer = setTimeout(resolve, ms)));
    await Promise.race([work, timeout]).finally(() => clearTimeout(timer));
  }
}
