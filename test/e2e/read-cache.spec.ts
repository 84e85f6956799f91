import { ON_POSTGRES } from '../support/database';
import { parseExposition, valueOf } from '../support/metrics';
import { apiFetch, onFreshServer, RunningServer } from '../support/server';
import { tfState } from '../support/services';

/**
 * On the embedded database the current version of a state is looked up in memory while no
 * statement that may change units, states or versions has run since it was read. Every change — through any door —
 * must show in the very next read, and reads with nothing changed must not query. On
 * PostgreSQL (other replicas write too) nothing is kept: every read queries.
 */

jest.setTimeout(60_000);

const enc = encodeURIComponent;

describe(`state reads and the current-version cache (${ON_POSTGRES ? 'PostgreSQL' : 'embedded'})`, () => {
  let server: RunningServer;
  onFreshServer((s) => (server = s));

  const unitPath = (name: string) => `/v1/units/${enc(name)}`;
  const put = async (name: string, body: string) => {
    const r = await apiFetch(server, `${unitPath(name)}/state`, {
      method: 'PUT',
      body,
      headers: { 'Content-Type': 'application/json' },
    });
    expect(r.status).toBe(200);
  };
  /** The state through the API and through the HTTP backend: the same answer, as text. */
  const read = async (name: string): Promise<string | number> => {
    const [api, backend] = await Promise.all([
      apiFetch(server, `${unitPath(name)}/state`),
      apiFetch(server, `/v1/backend/${name}`),
    ]);
    const [a, b] = [await api.text(), await backend.text()];
    expect({ status: backend.status, body: backend.status === 200 ? b : '' }).toEqual({
      status: api.status,
      body: api.status === 200 ? a : '',
    });
    return api.status === 200 ? a : api.status;
  };
  const call = async (method: string, path: string) => {
    const r = await apiFetch(server, path, { method });
    expect(r.status).toBeLessThan(300);
  };
  const cacheCounts = async () => {
    const samples = parseExposition(await (await apiFetch(server, '/metrics')).text());
    return {
      hits: valueOf(samples, 'statehouse_state_read_cache_total', { result: 'hit' }) ?? 0,
      misses: valueOf(samples, 'statehouse_state_read_cache_total', { result: 'miss' }) ?? 0,
    };
  };
  /** Hits and misses since `before` (a `cacheCounts()`). */
  const cacheSince = async (before: { hits: number; misses: number }) => {
    const after = await cacheCounts();
    return { hits: after.hits - before.hits, misses: after.misses - before.misses };
  };

  it('reads with nothing changed in between are answered without a query (embedded only)', async () => {
    const name = 'cache/repeat';
    const body = tfState(1, 'lineage-c');
    await put(name, body);
    const before = await cacheCounts();
    for (let i = 0; i < 20; i++) expect(await read(name)).toBe(body);
    const { hits, misses } = await cacheSince(before);
    if (ON_POSTGRES) {
      expect({ hits, misses }).toEqual({ hits: 0, misses: 0 });
    } else {
      // 40 reads; the batched audit insert of the reads (every 250 ms) changes no state.
      expect(hits + misses).toBe(40);
      expect(hits).toBeGreaterThanOrEqual(38);
    }
  });

  it('reads stay answered from memory while the audit log stores their events in between, and a write still shows at once (embedded only)', async () => {
    const name = 'cache/audited';
    const v1 = tfState(1, 'lineage-a');
    const v2 = tfState(2, 'lineage-a');
    await put(name, v1);
    const auditInserts = async () =>
      valueOf(
        parseExposition(await (await apiFetch(server, '/metrics')).text()),
        'statehouse_database_statements_total',
        { kind: 'audit' },
      ) ?? 0;
    const get = async () => {
      const r = await apiFetch(server, `${unitPath(name)}/state`);
      return r.status === 200 ? r.text() : r.status;
    };
    expect(await get()).toBe(v1);
    const before = await cacheCounts();
    const insertsBefore = await auditInserts();
    for (let i = 0; i < 50; i++) {
      // Each read queues a `state.read` event; the queue is stored every 250 ms.
      await new Promise((r) => setTimeout(r, 100));
      expect(await get()).toBe(v1);
    }
    const { hits, misses } = await cacheSince(before);
    // The flushes happened between the reads (more than one in three of them had one before).
    expect((await auditInserts()) - insertsBefore).toBeGreaterThanOrEqual(15);
    if (ON_POSTGRES) {
      expect({ hits, misses }).toEqual({ hits: 0, misses: 0 });
    } else {
      expect(hits + misses).toBe(50);
      expect(hits).toBeGreaterThanOrEqual(45);
    }
    await put(name, v2);
    expect(await get()).toBe(v2);
  });

  it('reads with an API token stay answered from memory: recording its use writes once a minute (embedded only)', async () => {
    const name = 'cache/api-token';
    const body = tfState(1, 'lineage-t');
    await put(name, body);
    const created = await apiFetch(server, '/v1/auth/tokens', {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ name: 'cache-reader', subject: 'svc:cache-reader' }),
    });
    expect(created.status).toBe(201);
    const { token } = (await created.json()) as { token: string };
    const get = () =>
      fetch(`${server.url}/v1/backend/${name}`, { headers: { Authorization: `Bearer ${token}` } });
    expect((await get()).status).toBe(200); // the first use is recorded
    const before = await cacheCounts();
    for (let i = 0; i < 20; i++) {
      const r = await get();
      expect({ status: r.status, body: await r.text() }).toEqual({ status: 200, body });
    }
    const { hits, misses } = await cacheSince(before);
    if (ON_POSTGRES) {
      expect({ hits, misses }).toEqual({ hits: 0, misses: 0 });
    } else {
      expect(hits + misses).toBe(20);
      expect(hits).toBeGreaterThanOrEqual(15);
    }
  });

  it('shows every change in the very next read: write, restore, delete, undelete, purge', async () => {
    const name = 'cache/changes';
    const v1 = tfState(1, 'lineage-x', { v: 1 });
    const v2 = tfState(2, 'lineage-x', { v: 2 });
    await put(name, v1);
    expect(await read(name)).toBe(v1);
    await put(name, v2);
    expect(await read(name)).toBe(v2);
    await call('POST', `${unitPath(name)}/versions/1/restore`);
    expect(await read(name)).toBe(v1);
    await call('DELETE', `${unitPath(name)}/state`);
    expect(await read(name)).toBe(404);
    await call('POST', `${unitPath(name)}/undelete?workspace=default`);
    expect(await read(name)).toBe(v1);
    await call('DELETE', unitPath(name));
    expect(await read(name)).toBe(404);
    await call('POST', `${unitPath(name)}/undelete`);
    expect(await read(name)).toBe(v1);
    await call('DELETE', unitPath(name));
    await call('POST', `${unitPath(name)}/purge`);
    expect(await read(name)).toBe(404);
    // A new unit of the same name starts from nothing.
    const fresh = tfState(1, 'lineage-new');
    await put(name, fresh);
    expect(await read(name)).toBe(fresh);
  });

  it('a write through the HTTP backend shows in the next read through the API', async () => {
    const name = 'cache/doors';
    await put(name, tfState(1, 'lineage-d'));
    expect(await read(name)).toBe(tfState(1, 'lineage-d'));
    const next = tfState(2, 'lineage-d');
    const r = await apiFetch(server, `/v1/backend/${name}`, { method: 'POST', body: next });
    expect(r.status).toBe(200);
    expect(await read(name)).toBe(next);
  });
});
