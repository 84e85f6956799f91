import type { PGlite } from '@electric-sql/pglite';
import { createServer, Server, Socket } from 'node:net';
import { mayChangeWatched, WatchedTables } from './statement-changes';

/** Protocol codes of the untyped first messages (PostgreSQL protocol 3.0). */
const SSL_REQUEST = 80877103;
const GSSENC_REQUEST = 80877104;
const CANCEL_REQUEST = 80877102;
const TERMINATE = 0x58; // 'X'
const QUERY = 0x51; // 'Q'
const PARSE = 0x50; // 'P'
const BIND = 0x42; // 'B'
const SYNC = 0x53; // 'S'
const FUNCTION_CALL = 0x46; // 'F'

/**
 * Judges a connection's frontend messages, in order: whether each may change a watched table
 * (conservative: unknown means yes; see `mayChangeWatched`). Only Parse and Query carry SQL.
 */
class ChangeJudge {
  /**
   * Whether a Bind of the unnamed statement may change a watched table: as judged at its Parse
   * since the last Sync, else yes. After an error PostgreSQL skips every message up to the next
   * Sync, so a Bind before that Sync runs what the Parse before it parsed, or nothing; past a
   * Sync (or a simple query) the unnamed statement may be one whose Parse we did not see run.
   */
  private unnamedChanges = true;

  constructor(private readonly watched: WatchedTables) {}

  mayChange(message: Buffer): boolean {
    const type = message[0];
    if (type === QUERY) {
      this.unnamedChanges = true;
      return mayChangeWatched(cstring(message, 5), this.watched);
    }
    if (type === PARSE) {
      const nameEnd = message.indexOf(0, 5);
      if (nameEnd < 0) return true;
      const changes = mayChangeWatched(cstring(message, nameEnd + 1), this.watched);
      if (nameEnd === 5) this.unnamedChanges = changes;
      return changes;
    }
    if (type === BIND) {
      // A named statement was parsed earlier, perhaps in an earlier batch: what it does is not
      // looked up again, so running it counts.
      const portalEnd = message.indexOf(0, 5);
      if (portalEnd < 0 || message[portalEnd + 1] !== 0) return true;
      return this.unnamedChanges;
    }
    if (type === SYNC) this.unnamedChanges = true;
    // A function call by OID may run any function; the rest (Describe, Execute, Sync, Close,
    // Flush, copy data) only go on with what a Parse, Bind or Query above began.
    return type === FUNCTION_CALL;
  }
}

function cstring(message: Buffer, start: number): string {
  const end = message.indexOf(0, start);
  return message.toString('utf8', start, end < 0 ? message.length : end);
}

/**
 * Serves PGlite's single session to the `pg` driver over a Unix socket, one connection at a time.
 *
 * Every complete protocol message that has arrived is handed to PGlite in one call, so a query
 * (Parse, Bind, Describe, Execute, Sync) costs one trip into WebAssembly, not five; PostgreSQL
 * reads the batch in order exactly as it reads a socket. Calls are serialized, and a connection
 * that closes inside a transaction has it rolled back before anything of the next one runs.
 * A connection that arrives while another is open waits until that one has closed: two clients
 * would interleave their transactions in the one session (and a pool that replaces a closed
 * connection may connect before this side has seen the close).
 */
export class PgliteBridge {
  private readonly server: Server;
  private active: Socket | undefined;
  private readonly waiting: Socket[] = [];
  /** Every call into PGlite runs on this chain, one after the other. */
  private chain: Promise<unknown> = Promise.resolve();
  private changeCount = 0;

  constructor(
    private readonly db: PGlite,
    private readonly path: string,
    /** The tables whose changes are counted (`changes`). */
    private readonly watched: WatchedTables,
  ) {
    this.server = createServer((socket) => this.accept(socket));
  }

  /**
   * How many batches that may change a watched table have been handed on so far (counted when
   * they are queued, before they run; see `mayChangeWatched` for what counts, and why
   * transaction control does not). What a plain SELECT read of the watched tables outside a
   * transaction stays true while this count is unchanged: this process is the only client of
   * the database, and its one session serves one connection at a time.
   */
  get changes(): number {
    return this.changeCount;
  }

  start(): Promise<void> {
    return new Promise((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(this.path, () => {
        this.server.off('error', reject);
        resolve();
      });
    });
  }

  /** Stops listening, closes the open connections and waits for PGlite to finish its work. */
  async stop(): Promise<void> {
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    for (const socket of this.waiting.splice(0)) socket.destroy();
    this.active?.destroy();
    await closed;
    await this.chain;
  }

  private accept(socket: Socket): void {
    if (this.active) {
      socket.pause();
      this.waiting.push(socket);
      socket.once('close', () => {
        const at = this.waiting.indexOf(socket);
        if (at >= 0) this.waiting.splice(at, 1);
      });
      return;
    }
    this.serve(socket);
  }

  private serve(socket: Socket): void {
    this.active = socket;
    let pending: Buffer = Buffer.alloc(0);
    let started = false;
    const judge = new ChangeJudge(this.watched);
    const run = (work: () => Promise<unknown>): void => {
      this.chain = this.chain.then(work).catch(() => socket.destroy());
    };
    socket.on('data', (data: Buffer) => {
      pending = pending.length === 0 ? data : Buffer.concat([pending, data]);
      const messages: Buffer[] = [];
      let offset = 0;
      let terminate = false;
      while (!terminate) {
        const left = pending.length - offset;
        if (!started) {
          if (left < 8) break;
          const length = pending.readInt32BE(offset);
          const code = pending.readInt32BE(offset + 4);
          if (length < 8 || left < length) break;
          if (code === SSL_REQUEST || code === GSSENC_REQUEST) {
            socket.write('N');
          } else if (code === CANCEL_REQUEST) {
            terminate = true; // not supported; a cancel request's connection carries nothing else
          } else {
            started = true;
            messages.push(pending.subarray(offset, offset + length));
          }
          offset += length;
          continue;
        }
        if (left < 5) break;
        const length = 1 + pending.readInt32BE(offset + 1);
        if (length < 5 || left < length) break;
        const message = pending.subarray(offset, offset + length);
        if (message[0] === TERMINATE) terminate = true;
        else messages.push(message);
        offset += length;
      }
      pending = pending.subarray(offset);
      if (messages.length > 0) {
        // Every message is judged (not `some`): a Parse further on may set the unnamed statement.
        if (messages.map((m) => judge.mayChange(m)).includes(true)) this.changeCount++;
        const batch = new Uint8Array(Buffer.concat(messages));
        run(() =>
          this.db.execProtocolRawStream(batch, {
            onRawData: (out) => {
              // `out` may be a view of WebAssembly memory that the next call reuses: copy it.
              if (!socket.destroyed) socket.write(Buffer.from(out));
            },
          }),
        );
      }
      if (terminate) socket.end();
    });
    socket.on('error', () => socket.destroy());
    socket.on('close', () => {
      // Queued before anything the next connection sends, so it starts outside a transaction.
      run(async () => {
        if (this.db.isInTransaction()) await this.db.exec('ROLLBACK');
      });
      if (this.active !== socket) return;
      this.active = undefined;
      const next = this.waiting.shift();
      if (next) {
        this.serve(next);
        next.resume();
      }
    });
  }
}
