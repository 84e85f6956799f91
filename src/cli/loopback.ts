import { timingSafeEqual } from 'node:crypto';
import { createServer, IncomingMessage, Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { CliError } from './errors';

function sameSecret(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

/** What came back to the loopback redirect, with the browser's request still waiting. */
export interface Callback {
  code: string;
  /** Answers the browser with a page, then stops the listener. */
  finish: (ok: boolean, message: string) => Promise<void>;
}

function page(ok: boolean, message: string): string {
  const text = message.replace(
    /[&<>"']/g,
    (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c] ?? c,
  );
  return `<!doctype html><html><head><meta charset="utf-8"><title>Statehouse login</title></head><body style="font-family:sans-serif;margin:3em"><h1>${ok ? 'Logged in' : 'Login failed'}</h1><p>${text}</p><p>You can close this window and return to the terminal.</p></body></html>\n`;
}

/**
 * A one-shot HTTP listener on 127.0.0.1 (random port) for the authorization response
 * (RFC 8252 loopback redirect). The first request to /callback decides: an error from the
 * provider, a wrong `state` or `iss`, or a missing code fail the login; anything else on the
 * port gets 404.
 */
export class LoopbackReceiver {
  private readonly server: Server;
  private settled = false;
  private resolveCb!: (cb: Callback) => void;
  private rejectCb!: (e: Error) => void;
  readonly result: Promise<Callback>;

  constructor(
    private readonly expectedState: string,
    private readonly issuer: string,
  ) {
    this.result = new Promise<Callback>((resolve, reject) => {
      this.resolveCb = resolve;
      this.rejectCb = reject;
    });
    this.result.catch(() => undefined); // observed by the caller; avoid an unhandled rejection
    this.server = createServer((req, res) => this.onRequest(req, res));
  }

  async listen(): Promise<string> {
    await new Promise<void>((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(0, '127.0.0.1', () => resolve());
    });
    const { port } = this.server.address() as AddressInfo;
    return `http://127.0.0.1:${port}/callback`;
  }

  fail(e: Error): void {
    if (this.settled) return;
    this.settled = true;
    this.rejectCb(e);
  }

  async close(): Promise<void> {
    await new Promise<void>((resolve) => {
      this.server.close(() => resolve());
      this.server.closeAllConnections();
    });
  }

  private send(res: ServerResponse, status: number, ok: boolean, message: string): void {
    res.writeHead(status, {
      'content-type': 'text/html; charset=utf-8',
      'cache-control': 'no-store',
      connection: 'close',
    });
    res.end(page(ok, message));
  }

  private onRequest(req: IncomingMessage, res: ServerResponse): void {
    const url = new URL(req.url ?? '/', 'http://127.0.0.1');
    if (url.pathname !== '/callback') {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('not found\n');
      return;
    }
    if (req.method !== 'GET') {
      res.writeHead(405, { allow: 'GET', 'content-type': 'text/plain' }).end('GET only\n');
      return;
    }
    if (this.settled) {
      this.send(res, 409, false, 'This login has already received an answer.');
      return;
    }
    const q = url.searchParams;
    const refuse = (message: string): void => {
      this.send(res, 400, false, message);
      this.fail(new CliError(message));
    };
    const state = q.get('state');
    if (state === null || !sameSecret(state, this.expectedState)) {
      refuse(
        'the login answer does not belong to this login (state mismatch); start the login again',
      );
      return;
    }
    const iss = q.get('iss');
    if (iss !== null && iss !== this.issuer) {
      refuse(`the login answer comes from another issuer (${iss}, expected ${this.issuer})`);
      return;
    }
    const error = q.get('error');
    if (error !== null) {
      const description = q.get('error_description');
      refuse(
        `the OpenID provider refused the login: ${error}${description ? ` (${description})` : ''}`,
      );
      return;
    }
    const code = q.get('code');
    if (!code) {
      refuse('the login answer carries no authorization code');
      return;
    }
    this.settled = true;
    this.resolveCb({
      code,
      finish: async (ok, message) => {
        this.send(res, ok ? 200 : 400, ok, message);
        await this.close();
      },
    });
  }
}
