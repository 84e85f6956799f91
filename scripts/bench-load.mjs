// Load generator for `npm run bench`, run in its own process (an in-process generator
// understates a server). Prints one JSON line with the results.
//
//   node scripts/bench-load.mjs <scenario> <baseUrl> <token> <concurrency> <seconds> [sizeBytes]
//
// scenarios: post (each worker writes its own unit, serial increasing), get (each worker reads
// a unit prepared by `post`), lock (LOCK + UNLOCK round trips, one state per worker),
// lock-contended (all workers on one state).
import http from 'node:http';
import { randomUUID } from 'node:crypto';

const [scenario, baseUrl, token, concArg, secondsArg, sizeArg] = process.argv.slice(2);
const concurrency = Number(concArg);
const seconds = Number(secondsArg);
const size = Number(sizeArg ?? 0);
const agent = new http.Agent({ keepAlive: true, maxSockets: concurrency });
const auth = `Basic ${Buffer.from(`bench:${token}`).toString('base64')}`;
const url = new URL(baseUrl);

function send(method, path, body) {
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
function stateTemplate(total) {
  const head = '{\n  "version": 4,\n  "terraform_version": "1.11.4",\n  "serial": ';
  const serialSlot = ' '.repeat(16);
  const mid =
    ',\n  "lineage": "bench-lineage",\n  "outputs": {\n    "id": {\n      "value": "bench",\n      "type": "string"\n    }\n  },\n  "resources": [\n';
  const tail = '\n  ],\n  "check_results": null\n}\n';
  const resources = [];
  let used = head.length + serialSlot.length + mid.length + tail.length;
  for (let i = 0; used < total; i++) {
    const r = JSON.stringify(
      {
        mode: 'managed',
        type: 'terraform_data',
        name: `r${i}`,
        provider: 'provider["terraform.io/builtin/terraform"]',
        instances: [
          {
            schema_version: 0,
            attributes: {
              id: `00000000-0000-0000-0000-${String(i).padStart(12, '0')}`,
              input: { value: 'x'.repeat(700), type: 'string' },
              output: null,
              triggers_replace: null,
            },
            sensitive_attributes: [],
          },
        ],
      },
      null,
      2,
    ).replace(/^/gm, '    ');
    resources.push(r);
    used += r.length + 2;
  }
  const buf = Buffer.from(head + serialSlot + mid + resources.join(',\n') + tail);
  return {
    buf,
    setSerial(n) {
      buf.write(String(n).padEnd(16, ' '), head.length, 'latin1');
    },
  };
}

async function runWorkers(work) {
  const deadline = Date.now() + seconds * 1000;
  const latencies = [];
  let ok = 0;
  let other = 0;
  let bytes = 0;
  const statuses = {};
  const started = Date.now();
  await Promise.all(
    Array.from({ length: concurrency }, async (_, w) => {
      let i = 0;
      while (Date.now() < deadline) {
        const t0 = performance.now();
        const r = await work(w, i++);
        latencies.push(performance.now() - t0);
        statuses[r.status] = (statuses[r.status] ?? 0) + 1;
        if (r.ok) {
          ok++;
          bytes += r.bytes;
        } else other++;
      }
    }),
  );
  const elapsed = (Date.now() - started) / 1000;
  latencies.sort((a, b) => a - b);
  const pct = (p) =>
    latencies[Math.min(latencies.length - 1, Math.floor(latencies.length * p))] ?? 0;
  return {
    scenario,
    concurrency,
    seconds: Number(elapsed.toFixed(2)),
    ok,
    other,
    statuses,
    perSecond: Number((ok / elapsed).toFixed(1)),
    mbPerSecond: Number((bytes / elapsed / 1e6).toFixed(1)),
    p50ms: Number(pct(0.5).toFixed(1)),
    p99ms: Number(pct(0.99).toFixed(1)),
  };
}

const unitFor = (w) => `/v1/backend/bench/${scenario === 'get' ? 'post' : scenario}-${size}-${w}`;

let result;
switch (scenario) {
  case 'post': {
    const templates = Array.from({ length: concurrency }, () => stateTemplate(size));
    result = await runWorkers(async (w, i) => {
      const t = templates[w];
      t.setSerial(i + 1);
      const r = await send('POST', unitFor(w), t.buf);
      return { ok: r.status === 200, status: r.status, bytes: t.buf.length };
    });
    break;
  }
  case 'get': {
    const expected = stateTemplate(size).buf.length;
    result = await runWorkers(async (w) => {
      const r = await send('GET', unitFor(w));
      return { ok: r.status === 200 && r.bytes === expected, status: r.status, bytes: r.bytes };
    });
    break;
  }
  case 'lock':
  case 'lock-contended':
    result = await runWorkers(async (w) => {
      const path =
        scenario === 'lock' ? `/v1/backend/bench/lock-${w}` : '/v1/backend/bench/contended';
      const info = Buffer.from(
        JSON.stringify({ ID: randomUUID(), Operation: 'OperationTypeApply', Who: `w${w}` }),
      );
      const l = await send('LOCK', path, info);
      if (l.status !== 200) return { ok: false, status: l.status, bytes: 0 };
      const u = await send('UNLOCK', path, info);
      return { ok: u.status === 200, status: u.status, bytes: 0 };
    });
    break;
  default:
    throw new Error(`unknown scenario ${scenario}`);
}
agent.destroy();
process.stdout.write(`${JSON.stringify(result)}\n`);
