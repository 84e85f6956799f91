import type { Server, ServerResponse } from 'node:http';

/** The exit status after a clean stop on a signal: 128 + the signal's number, as shells report. */
export const SIGNAL_EXIT_STATUS = { SIGINT: 130, SIGTERM: 143 } as const;
export type StopSignal = keyof typeof SIGNAL_EXIT_STATUS;

/**
 * The requests in flight on an HTTP server, and stopping it without cutting them off. The stop
 * has two steps: `beginStop` (the signal) — every answer not yet started gets
 * `Connection: close`, so a kept-alive connection closes after its current request, and idle
 * kept-alive connections are closed; new connections are still accepted — then `drain` (after
 * the grace): no new connections, each remaining connection closed once its answer is out.
 */
export class RequestTracker {
  private readonly inFlight = new Set<ServerResponse>();
  private stopping = false;

  constructor(private readonly server: Server) {
    server.on('request', (_req, res: ServerResponse) => {
      this.inFlight.add(res);
      if (this.stopping) closeAfter(res);
      res.once('close', () => {
        this.inFlight.delete(res);
        if (this.stopping) server.closeIdleConnections();
      });
    });
  }

  get count(): number {
    return this.inFlight.size;
  }

  /** The stop begins: connections close after their current answer; new ones still come in. */
  beginStop(): void {
    this.stopping = true;
    for (const res of this.inFlight) closeAfter(res);
    this.server.closeIdleConnections();
  }

  /**
   * Stops accepting connections and resolves true once every connection has ended, or false
   * when some are still open at `deadline` (epoch ms; those are then closed).
   */
  drain(deadline: number): Promise<boolean> {
    this.beginStop();
    return new Promise<boolean>((resolve) => {
      const timer = setTimeout(
        () => {
          this.server.closeAllConnections();
          resolve(false);
        },
        Math.max(0, deadline - Date.now()),
      );
      this.server.close(() => {
        clearTimeout(timer);
        resolve(true);
      });
      this.server.closeIdleConnections();
    });
  }
}

/** An answer not yet started closes its connection when it is done (HTTP/1.1 keep-alive ends). */
function closeAfter(res: ServerResponse): void {
  if (!res.headersSent) res.setHeader('Connection', 'close');
}
