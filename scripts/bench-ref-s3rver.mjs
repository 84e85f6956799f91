// A reference for `npm run bench`: s3rver, the Node S3 server people test against, serving
// bucket `tfstate` from <dir>. Clients sign with its fixed credentials (access key and secret
// `S3RVER`); note that it does not check SigV4 signatures (its V4 support is incomplete: a
// presigned URL with a wrong signature is served), so it does less work per request than a
// server that verifies them.
//
//   node scripts/bench-ref-s3rver.mjs <dir>
//
// Listens on 127.0.0.1 (PORT, default any) and prints `{"port":N}`; SIGTERM/SIGINT close it.
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const S3rver = require('s3rver');

const dir = process.argv[2];
if (!dir) {
  process.stderr.write('usage: node scripts/bench-ref-s3rver.mjs <dir>\n');
  process.exit(2);
}
const server = new S3rver({
  address: '127.0.0.1',
  port: Number(process.env.PORT ?? 0),
  directory: dir,
  silent: true,
  configureBuckets: [{ name: 'tfstate' }],
});
const { port } = await server.run();
process.stdout.write(`${JSON.stringify({ port })}\n`);
const stop = () => void server.close().then(() => process.exit(0));
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
