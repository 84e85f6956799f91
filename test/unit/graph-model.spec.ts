import {
  analyse,
  dependencyOrder,
  edgeStatus,
  findCycles,
  GraphEdge,
  nodeKey,
  toDot,
  toMermaid,
} from '../../src/graph/graph-model';

const n = (unit: string, workspace = 'default') => ({ unit, workspace });
let id = 0;
const edge = (
  from: string,
  to: string,
  recorded: Record<string, string>,
  extra: Partial<GraphEdge> = {},
): GraphEdge => ({
  id: `e${++id}`,
  producer: n(from),
  consumer: n(to),
  source: 'discovered',
  name: 'x',
  outputs: null,
  input: null,
  recorded,
  sensitiveExcluded: false,
  recordedAt: '2026-01-01T00:00:00Z',
  ...extra,
});
const producers = (m: Record<string, Record<string, string> | undefined>) =>
  new Map(Object.entries(m).map(([k, d]) => [`${k}#default`, d ? { version: 1, digests: d } : {}]));

describe('edge status', () => {
  it('an edge that excludes sensitive outputs never compares one the producer marks sensitive', () => {
    const producer = { version: 3, digests: { vpc: 'a', pw: 'secret' }, sensitive: ['pw'] };
    const right = edge('net', 'app', { vpc: 'a', pw: 'secret' }, { sensitiveExcluded: true });
    const wrong = edge('net', 'app', { vpc: 'a', pw: 'guess' }, { sensitiveExcluded: true });
    expect(edgeStatus(right, producer)).toEqual({ status: 'ok', changed: [] });
    expect(edgeStatus(wrong, producer)).toEqual(edgeStatus(right, producer));
    const declared = edge('net', 'app', { vpc: 'a' }, { sensitiveExcluded: true, outputs: ['pw'] });
    expect(edgeStatus(declared, producer)).toEqual({ status: 'ok', changed: [] });
    // An edge that may compare them does: a changed sensitive output makes it stale.
    expect(edgeStatus({ ...wrong, sensitiveExcluded: false }, producer)).toEqual({
      status: 'stale',
      changed: ['pw'],
    });
  });

  it('ok when every output the consumer read is unchanged, stale naming what changed, unknown when the producer is gone', () => {
    const e = edge('net', 'app', { vpc: 'a', subnets: 'b' });
    expect(edgeStatus(e, { version: 3, digests: { vpc: 'a', subnets: 'b', extra: 'z' } })).toEqual({
      status: 'ok',
      changed: [],
    });
    expect(edgeStatus(e, { version: 4, digests: { vpc: 'A', subnets: 'b' } })).toEqual({
      status: 'stale',
      changed: ['vpc'],
    });
    expect(edgeStatus(e, { version: 4, digests: { subnets: 'b' } })).toEqual({
      status: 'stale',
      changed: ['vpc'],
    });
    expect(edgeStatus(e, undefined)).toEqual({ status: 'unknown', changed: [] });
    expect(edgeStatus(e, {})).toEqual({ status: 'unknown', changed: [] });
  });

  it('a declared edge that names outputs compares only those', () => {
    const e = edge(
      'net',
      'app',
      { vpc: 'a', subnets: 'b' },
      { source: 'declared', outputs: ['subnets'] },
    );
    expect(edgeStatus(e, { version: 2, digests: { vpc: 'CHANGED', subnets: 'b' } }).status).toBe(
      'ok',
    );
    expect(edgeStatus(e, { version: 2, digests: { vpc: 'a', subnets: 'CHANGED' } }).status).toBe(
      'stale',
    );
  });
});

describe('node status', () => {
  it('red for a stale input, yellow downstream of red, green otherwise', () => {
    const edges = [
      edge('net', 'cluster', { v: '1' }),
      edge('cluster', 'app', { c: '1' }),
      edge('dns', 'app', { z: '1' }),
    ];
    const a = analyse(
      ['lonely#default'],
      edges,
      producers({ net: { v: '2' }, cluster: { c: '1' }, dns: { z: '1' } }),
    );
    expect(Object.fromEntries(a.status)).toEqual({
      'lonely#default': 'green',
      'net#default': 'green',
      'cluster#default': 'red',
      'app#default': 'yellow',
      'dns#default': 'green',
    });
  });

  it('reports cycles instead of looping on them', () => {
    const edges = [
      edge('a', 'b', { x: '1' }),
      edge('b', 'c', { x: '1' }),
      edge('c', 'a', { x: '2' }),
      edge('d', 'd', { x: '1' }),
    ];
    const a = analyse(
      [],
      edges,
      producers({ a: { x: '1' }, b: { x: '1' }, c: { x: '1' }, d: { x: '1' } }),
    );
    expect(a.cycles).toEqual([['a#default', 'b#default', 'c#default'], ['d#default']]);
    expect(a.status.get('a#default')).toBe('red');
    expect(a.status.get('b#default')).toBe('yellow');
  });

  it('finds no cycle in a deep chain, without recursion limits', () => {
    const out = new Map<string, string[]>();
    for (let i = 0; i < 50_000; i++) out.set(`n${i}`, [`n${i + 1}`]);
    expect(findCycles(out.keys(), out)).toEqual([]);
  });
});

describe('dependency order', () => {
  it('puts producers before consumers, and nodes of a cycle last', () => {
    const edges = [
      edge('net', 'cluster', {}),
      edge('cluster', 'app', {}),
      edge('x', 'y', {}),
      edge('y', 'x', {}),
    ];
    const order = dependencyOrder(
      new Set(['app#default', 'cluster#default', 'net#default', 'x#default', 'y#default']),
      edges,
    );
    expect(order.indexOf('net#default')).toBeLessThan(order.indexOf('cluster#default'));
    expect(order.indexOf('cluster#default')).toBeLessThan(order.indexOf('app#default'));
    expect(order.slice(-2)).toEqual(['x#default', 'y#default']);
    // A rank puts some nodes of a cycle first (the ones with a stale input, say).
    const ranked = dependencyOrder(
      new Set(['app#default', 'cluster#default', 'net#default', 'x#default', 'y#default']),
      edges,
      (k) => (k === 'y#default' ? 0 : 1),
    );
    expect(ranked.slice(-2)).toEqual(['y#default', 'x#default']);
  });
});

describe('renderings', () => {
  it('DOT and Mermaid name every node and edge, and mark stale edges', () => {
    const edges = [edge('net', 'app', { v: '1' })];
    const a = analyse([], edges, producers({ net: { v: '2' } }));
    const dot = toDot(a.status, edges, a.edges);
    expect(dot).toContain('"net#default" -> "app#default"');
    expect(dot).toContain('stale: v');
    const mm = toMermaid(a.status, edges, a.edges);
    expect(mm).toMatch(/^flowchart LR/);
    expect(mm).toContain('["app#default"]:::red');
    expect(mm).toMatch(/n\d -->\|"stale: v"\| n\d/);
    expect(nodeKey(n('a'))).toBe('a#default');
  });
});
