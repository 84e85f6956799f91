// How every bench reference server runs: on 127.0.0.1, on PORT (default 0: any free port), with
// one JSON line `{"port":N}` on stdout once it listens (what bench.mjs `startReference` reads),
// closed with its connections on SIGTERM or SIGINT.

/** Listens with `server` (a node:http Server) as a bench reference does. */
export function serveReference(server) {
  server.listen(Number(process.env.PORT ?? 0), '127.0.0.1', () => {
    process.stdout.write(`${JSON.stringify({ port: server.address().port })}\n`);
  });
  const stop = () => {
    server.close(() => process.exit(0));
    server.closeAllConnections();
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}
