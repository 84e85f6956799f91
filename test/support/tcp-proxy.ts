import { AddressInfo, createConnection, createServer, Server, Socket } from 'node:net';

/**
 * A TCP proxy in the test process, between a server and its PostgreSQL, that a test can cut:
 * `down('refuse')` drops every connection and closes new ones at once (a database that is
 * gone); `down('silent')` drops every connection and then accepts new ones but never answers
 * (a database that hangs, so only timeouts end the wait); `up()` forwards again.
 */
export interface TcpProxy {
  port: number;
  down(mode: 'refuse' | 'silent'): void;
  up(): void;
  close(): Promise<void>;
}

export async function startTcpProxy(target: { host: string; port: number }): Promise<TcpProxy> {
  let mode: 'up' | 'refuse' | 'silent' = 'up';
  const open = new Set<Socket>();
  const track = (s: Socket): void => {
    open.add(s);
    s.once('close', () => open.delete(s));
    s.on('error', () => s.destroy());
  };
  const server: Server = createServer((client) => {
    track(client);
    if (mode === 'refuse') {
      client.destroy();
      return;
    }
    if (mode === 'silent') return; // accepted, never answered
    const upstream = createConnection(target);
    track(upstream);
    client.pipe(upstream).pipe(client);
    const cut = (): void => {
      client.destroy();
      upstream.destroy();
    };
    client.once('close', cut);
    upstream.once('close', cut);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const dropAll = (): void => {
    for (const s of open) s.destroy();
  };
  return {
    port: (server.address() as AddressInfo).port,
    down(m) {
      mode = m;
      dropAll();
    },
    up() {
      mode = 'up';
      dropAll(); // silent connections held by clients would never answer
    },
    close: () =>
      new Promise<void>((resolve) => {
        dropAll();
        server.close(() => resolve());
      }),
  };
}
