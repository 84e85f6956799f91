// Load generator for `npm run bench`, run in its own process (an in-process generator
// understates a server). Prints one JSON line with the results.
//
//   node scripts/bench-load.mjs <scenario> <baseUrl> <token> <concurrency> <seconds> [sizeBytes]
//
// <baseUrl> may be a comma-separated list (replicas of one deployment): worker w talks to the
// (w mod n)-th.
//
// scenarios: post (each worker writes its own unit, serial increasing), get (each worker reads
// a unit prepared by `post`), lock (LOCK + UNLOCK round trips, one state per worker),
// lock-contended (all workers on one state), lock-fight (the workers fight over 4 states; each
// won lock is marked held here until just before its UNLOCK is sent, so a LOCK answered 200
// while another worker's mark is set is a second holder: counted in `twoHolders`, which must
// stay 0).
import http from 'node:http';
import { randomUUID } from 'node:crypto';
import { runWorkers, stateTemplate } from './lib/bench-common.mjs';

const [scenario, baseUrl, token, concArg, secondsArg, sizeArg] = process.argv.slice(2);
const concurrency = Number(concArg);
const seconds = Number(secondsArg);
const size = Number(sizeArg ?? 0);
const agent = new http.Agent({ keepAlive: true, maxSockets: concurrency });
const auth = `Basic ${Buffer.from(`bench:${token}`).toString('base64')}`;
const urls = baseUrl.split(',').map((u) => new URL(u));

function send(method, path, body, url = urls[0]) {
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: url.hostname,
        port: url.port,
        method,
        path,
        agent,
        headers: {
          Authorization: auth,
          'Content-Type': 'application/json',
          ...(body ? { 'Content-Length': body.length } : {}),
        },
      },
      (res) => {
        let bytes = 0;
        res.on('data', (d) => (bytes += d.length));
        res.on('end', () => resolve({ status: res.statusCode, bytes }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

/**
 * A valid v4 state of about `total` bytes shaped like a real one (many resource instances, small
 * outputs), pretty-printed like Terraform, whose serial can be patched in place.
 */
function runAll(work) {
  return runWorkers({ concurrency, seconds, work }).then((r) => ({ scenario, concurrency, ...r }));
}

const unitFor = (w) => `/v1/backend/bench/${scenario === 'get' ? 'post' : scenario}-${size}-${w}`;

let result;
switch (scenario) {
  case 'post': {
    const templates = Array.from({ length: concurrency }, () => stateTemplate(size));
    result = await runAll(async (w, i) => {
      const t = templates[w];
      t.setSerial(i + 1);
      const r = await send('POST', unitFor(w), t.buf);
      return { ok: r.status === 200, status: r.status, bytes: t.buf.length };
    });
    break;
  }
  case 'get': {
    const expected = stateTemplate(size).buf.length;
    result = await runAll(async (w) => {
      const r = await send('GET', unitFor(w));
      return { ok: r.status === 200 && r.bytes === expected, status: r.status, bytes: r.bytes };
    });
    break;
  }
  case 'lock':
  case 'lock-contended':
  case 'lock-fight': {
    const holders = new Map();
    let twoHolders = 0;
    result = await runAll(async (w) => {
      const path =
        scenario === 'lock'
          ? `/v1/backend/bench/lock-${w}`
          : scenario === 'lock-fight'
            ? `/v1/backend/bench/fight-${w % 4}`
            : '/v1/backend/bench/contended';
      const url = urls[w % urls.length];
      const info = Buffer.from(
        JSON.stringify({ ID: randomUUID(), Operation: 'OperationTypeApply', Who: `w${w}` }),
      );
      const l = await send('LOCK', path, info, url);
      if (l.status !== 200) return { ok: false, status: l.status, bytes: 0 };
      if (holders.has(path)) twoHolders++;
      holders.set(path, w);
      await new Promise((r) => setImmediate(r)); // let other answers arrive while this one holds
      holders.delete(path);
      const u = await send('UNLOCK', path, info, url);
      return { ok: u.status === 200, status: u.status, bytes: 0 };
    });
    result.twoHolders = twoHolders;
    break;
  }
  default:
    throw new Error(`unknown scenario ${scenario}`);
}
agent.destroy();
process.stdout.write(`${JSON.stringify(result)}\n`);
