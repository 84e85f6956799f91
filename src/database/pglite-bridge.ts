import type { PGlite } from '@electric-sql/pglite';
import { createServer, Server, Socket } from 'node:net';

/** Protocol codes of the untyped first messages (PostgreSQL protocol 3.0). */
const SSL_REQUEST = 80877103;
const GSSENC_REQUEST = 80877104;
const CANCEL_REQUEST = 80877102;
const TERMINATE = 0x58; // 'X'

/**
 * Serves PGlite's single session to the `pg` driver over a Unix socket, one connection at a time.
 *
 * Every complete protocol message that has arrived is handed to PGlite in one call, so a query
 * (Parse, Bind, Describe, Execute, Sync) costs one trip into WebAssembly, not five; PostgreSQL
 * reads the batch in order exactly as it reads a socket. Calls are serialized, and a connection
 * that closes inside a transaction has it rolled back before anything of the next one runs.
 * A second connection while one is open is refused: two clients would interleave their
 * transactions in the one session.
 */
export class PgliteBridge {
  private readonly server: Server;
  private active: Socket | undefined;
  /** Every call into PGlite runs on this chain, one after the other. */
  private chain: Promise<unknown> = Promise.resolve();

  constructor(
    private readonly db: PGlite,
    private readonly path: string,
  ) {
    this.server = createServer((socket) => this.accept(socket));
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

  /** Stops listening, closes the open connection and waits for PGlite to finish its work. */
  async stop(): Promise<void> {
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    this.active?.destroy();
    await closed;
    await this.chain;
  }

  private accept(socket: Socket): void {
    if (this.active) {
      socket.end('Too many connections\n');
      return;
    }
    this.active = socket;
    let pending: Buffer = Buffer.alloc(0);
    let started = false;
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
        if (pending[offset] === TERMINATE) terminate = true;
        else messages.push(pending.subarray(offset, offset + length));
        offset += length;
      }
      pending = pending.subarray(offset);
      if (messages.length > 0) {
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
      if (this.active === socket) this.active = undefined;
    });
  }
}
