// The ceiling for `node scripts/bench-s3.mjs`: a bare Node `http` server that streams PUT bodies
// to a file in a directory and streams GETs back from that file, with no checks at all (no
// authentication, no signature, no digest, no state validation, no database). Whatever the S3
// door of Statehouse does on top of moving the bytes is what separates it from this.
//
//   node scripts/bench-bare.mjs <dir> [--memory] [--fsync]
//
// --memory: a PUT body is also kept in memory and GETs answer from there (the ceiling for reads:
// "bare Node returning the same bytes from memory"). --fsync: a PUT is fsynced to its file before
// the answer (the ceiling for a durable write).
//
// Listens on 127.0.0.1, on PORT (default 0: any free port), and prints one JSON line
// `{"port":N}` once it listens. SIGTERM/SIGINT close it.
import http from 'node:http';
import { createReadStream, createWriteStream, fsyncSync, renameSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { serveReference } from './lib/reference-server.mjs';

const dir = process.argv[2];
if (!dir || dir.startsWith('--')) {
  process.stderr.write('usage: node scripts/bench-bare.mjs <dir> [--memory] [--fsync]\n');
  process.exit(2);
}
const fromMemory = process.argv.includes('--memory');
const durable = process.argv.includes('--fsync');
/** Bodies by path, with --memory. */
const held = new Map();

let tmpCounter = 0;
/** One flat file per request path (query ignored). */
const fileFor = (url) => join(dir, encodeURIComponent(url.split('?')[0]));

const server = http.createServer(async (req, res) => {
  const file = fileFor(req.url ?? '/');
  try {
    if (req.method === 'PUT') {
      // Written aside and renamed, so a reader never sees half a body: that is storage, not a
      // check. Node answers `Expect: 100-continue` by itself (no checkContinue listener).
      const tmp = `${file}.tmp-${process.pid}-${tmpCounter++}`;
      const chunks = [];
      if (fromMemory) req.on('data', (c) => chunks.push(c));
      const out = createWriteStream(tmp);
      // Before the stream closes its descriptor: fsync it (the 'finish' of the last write).
      if (durable) out.on('finish', () => fsyncSync(out.fd));
      await pipeline(req, out);
      renameSync(tmp, file);
      if (fromMemory) held.set(file, Buffer.concat(chunks));
      res.writeHead(200, { 'Content-Length': '0' });
      res.end();
      return;
    }
    if (req.method === 'GET' && held.has(file)) {
      const body = held.get(file);
      res.writeHead(200, { 'Content-Type': 'application/json', 'Content-Length': body.length });
      res.end(body);
      return;
    }
    if (req.method === 'GET') {
      let size;
      try {
        size = statSync(file).size;
      } catch {
        res.writeHead(404, { 'Content-Length': '0' });
        res.end();
        return;
      }
      res.writeHead(200, { 'Content-Type': 'application/json', 'Content-Length': String(size) });
      await pipeline(createReadStream(file), res);
      return;
    }
    req.resume();
    res.writeHead(405, { 'Content-Length': '0' });
    res.end();
  } catch {
    res.destroy();
  }
});

serveReference(server);
