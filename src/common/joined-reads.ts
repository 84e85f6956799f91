/**
 * Reads that callers arriving together share: a caller joins a read of the same key that has
 * not been sent yet, and otherwise starts one of its own. A read is sent once the event loop
 * has taken every request that was ready alongside the first (`setImmediate`), so a burst of
 * GETs of one state costs one statement instead of one each.
 *
 * Never a stale answer: a caller only ever joins a read that is sent after it arrived, so the
 * answer reflects every change that had completed by then — what a read of its own would
 * have seen. A read already sent is never joined. The answer is shared, so it is frozen.
 *
 * Holds only the reads of one turn of the event loop; nothing is kept once they are sent.
 */
export class JoinedReads<T extends object | undefined> {
  private readonly waiting = new Map<string, Promise<T>>();
  /** Reads sent, and callers that joined one instead (for tests). */
  sent = 0;
  joined = 0;

  read(key: string, run: () => Promise<T>): Promise<T> {
    const waiting = this.waiting.get(key);
    if (waiting) {
      this.joined++;
      return waiting;
    }
    const read = new Promise<T>((resolve, reject) => {
      setImmediate(() => {
        // From here on a caller starts a read of its own: this one goes out now.
        this.waiting.delete(key);
        this.sent++;
        // A `run` that throws rather than rejects fails its callers too, never the process.
        new Promise<T>((started) => started(run())).then(
          (answer) => resolve(answer && Object.freeze(answer)),
          reject,
        );
      });
    });
    this.waiting.set(key, read);
    return read;
  }
}
