// The floor for `terraform plan` with `backend "s3"` (npm run bench, plan section): an S3 stub
// that keeps objects in memory and checks nothing — no signature, no credentials, no database.
// It answers what a plan asks (ListObjectsV2 of the bucket, HeadObject, GetObject with a range,
// PutObject with If-None-Match: * for the `.tflock`, DeleteObject), so whatever a plan against
// Statehouse costs over a plan against this is the server's own work.
//
//   node scripts/bench-ref-s3stub.mjs
//
// Paths are `/s3/<bucket>/<key>`. Listens on 127.0.0.1, on PORT (default 0: any free port), and
// prints one JSON line `{"port":N}` once it listens. SIGTERM/SIGINT close it.
import { createHash } from 'node:crypto';
import http from 'node:http';
import { serveReference } from './lib/reference-server.mjs';

/** Object bodies by key (one bucket: the stub ignores the bucket's name). */
const objects = new Map();
const etagOf = (b) => `"${createHash('md5').update(b).digest('hex')}"`;
const xml = (res, status, body) => {
  res.writeHead(status, { 'content-type': 'application/xml' });
  res.end(`<?xml version="1.0" encoding="UTF-8"?>${body}`);
};

function answer(req, res, body) {
  const path = new URL(req.url ?? '/', 'http://stub').pathname;
  const key = path.split('/').filter(Boolean).slice(2).map(decodeURIComponent).join('/');
  if (key === '') {
    const items = [...objects]
      .map(([k, b]) => `<Contents><Key>${k}</Key><Size>${b.length}</Size></Contents>`)
      .join('');
    return xml(
      res,
      200,
      `<ListBucketResult><KeyCount>${objects.size}</KeyCount><IsTruncated>false</IsTruncated>${items}</ListBucketResult>`,
    );
  }
  const held = objects.get(key);
  if (req.method === 'PUT') {
    if (req.headers['if-none-match'] === '*' && held)
      return xml(res, 412, '<Error><Code>PreconditionFailed</Code></Error>');
    objects.set(key, body);
    res.writeHead(200, { etag: etagOf(body) });
    return res.end();
  }
  if (req.method === 'DELETE') {
    objects.delete(key);
    res.writeHead(204);
    return res.end();
  }
  if (!held) return xml(res, 404, '<Error><Code>NoSuchKey</Code></Error>');
  const range = /^bytes=(\d+)-(\d*)$/.exec(req.headers.range ?? '');
  const start = range ? Number(range[1]) : 0;
  const end = range && range[2] ? Math.min(Number(range[2]), held.length - 1) : held.length - 1;
  const headers = { etag: etagOf(held), 'content-length': end - start + 1 };
  if (range) headers['content-range'] = `bytes ${start}-${end}/${held.length}`;
  res.writeHead(range ? 206 : 200, headers);
  res.end(req.method === 'HEAD' ? undefined : held.subarray(start, end + 1));
}

const server = http.createServer((req, res) => {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => answer(req, res, Buffer.concat(chunks)));
});
serveReference(server);
