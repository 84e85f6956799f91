import type { Server } from 'node:http';

/** The exit status after a clean stop on a signal: 128 + the signal's number, as shells report. */
export const SIGNAL_EXIT_STATUS = { SIGINT: 130, SIGTERM: 143 } as const;
export type StopSignal = keyof typeof SIGNAL_EXIT_STATUS;

/**
 * The requests in flight on an HTTP server, and stopping it without cutting them off: no new
 * connections, idle kept-alive connections closed, requests still arriving on open connections
 * answered with `Connection: close`, each connection closed once its answer is out.
 */
export class RequestTracker {
  private inFlight = 0;
  private stopping = false;

  constructor(private readonly server: Server) {
    server.on('request', (_req, res) => {
      this.inFlight++;
      if (this.stopping) res.setHeader('Connection', 'close');
      res.once('close', () => {
        this.inFlight--;
        if (this.stopping) server.closeIdleConnections();
      });
    });
  }

  get count(): number {
    return this.inFlight;
  }

  /**
   * Stops accepting connections and resolves true once every connection has ended, or false
   * when some are still open after `timeoutMs` (those are then closed).
   */
  drain(timeoutMs: number): Promise<boolean> {
    this.stopping = true;
    return new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => {
        this.server.closeAllConnections();
        resolve(false);
      }, timeoutMs);
      this.server.close(() => {
        clearTimeout(timer);
        resolve(true);
      });
      this.server.closeIdleConnections();
    });
  }
}
