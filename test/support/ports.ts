import { AddressInfo, createServer } from 'node:net';

/** A TCP port free on 127.0.0.1 right now (for a server whose public URL must name its port). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as AddressInfo;
      s.close(() => resolve(port));
    });
  });
}
