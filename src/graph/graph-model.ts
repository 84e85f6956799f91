/**
 * The dependency graph as pure functions: edge status from output digests, node status
 * (green / red / yellow), dependency order of what needs applying, cycles, and renderings for
 * people (Graphviz DOT, Mermaid). No database, no I/O.
 */
export interface NodeRef {
  unit: string;
  workspace: string;
}

export const nodeKey = (n: NodeRef): string => `${n.unit}#${n.workspace}`;

export interface GraphEdge {
  id: string;
  producer: NodeRef;
  consumer: NodeRef;
  source: 'declared' | 'discovered';
  /** The data source (discovered) or a label (declared). */
  name: string;
  /** For declared edges: only these outputs matter (null: all recorded ones). */
  outputs: string[] | null;
  /** For declared edges: as which input of the consumer. */
  input: string | null;
  /** Digests of the producer's outputs as the consumer last read them. */
  recorded: Record<string, string>;
  /**
   * The edge's author may not read the producer's sensitive outputs: the edge is judged on the
   * others only (an output sensitive in the producer's current version is never compared).
   */
  sensitiveExcluded: boolean;
  recordedAt: string;
}

export interface ProducerState {
  /** Current version number; undefined when the producer has no current state (or no unit). */
  version?: number;
  digests?: Record<string, string>;
  /** Names of the current version's sensitive outputs. */
  sensitive?: readonly string[];
}

export type EdgeStatus = 'ok' | 'stale' | 'unknown';

export interface EdgeVerdict {
  status: EdgeStatus;
  /** Outputs whose current value differs from what the consumer read. */
  changed: string[];
}

/**
 * An edge is stale when an output the consumer read (or the declared ones) has changed since —
 * never counting, for an edge that excludes them, the producer's sensitive outputs: a right and
 * a wrong guess of one then look the same.
 */
export function edgeStatus(edge: GraphEdge, producer: ProducerState | undefined): EdgeVerdict {
  if (!producer || producer.version === undefined || !producer.digests)
    return { status: 'unknown', changed: [] };
  const hidden = new Set(edge.sensitiveExcluded ? (producer.sensitive ?? []) : []);
  const names = (edge.outputs ?? Object.keys(edge.recorded)).filter((n) => !hidden.has(n));
  const changed = names.filter(
    (n) => edge.recorded[n] === undefined || producer.digests?.[n] !== edge.recorded[n],
  );
  return { status: changed.length > 0 ? 'stale' : 'ok', changed: changed.sort() };
}

export type NodeStatus = 'green' | 'red' | 'yellow';

export interface Analysis {
  edges: Map<string, EdgeVerdict>;
  status: Map<string, NodeStatus>;
  /** Strongly connected groups of more than one node (or a self-loop): reported, not looped on. */
  cycles: string[][];
}

/**
 * Red: an input edge is stale. Yellow: not red, but something upstream is red. Green: neither.
 * Every node of `nodes` and every end of an edge gets a status.
 */
export function analyse(
  nodes: Iterable<string>,
  edges: readonly GraphEdge[],
  producers: ReadonlyMap<string, ProducerState>,
): Analysis {
  const verdicts = new Map<string, EdgeVerdict>();
  const status = new Map<string, NodeStatus>();
  const out = new Map<string, string[]>();
  for (const n of nodes) status.set(n, 'green');
  for (const e of edges) {
    const p = nodeKey(e.producer);
    const c = nodeKey(e.consumer);
    if (!status.has(p)) status.set(p, 'green');
    if (!status.has(c)) status.set(c, 'green');
    const v = edgeStatus(e, producers.get(p));
    verdicts.set(e.id, v);
    if (v.status === 'stale') status.set(c, 'red');
    (out.get(p) ?? out.set(p, []).get(p)!).push(c);
  }
  // Everything downstream of a red node that is not red itself is yellow (visited once).
  const queue = [...status].filter(([, s]) => s === 'red').map(([k]) => k);
  const seen = new Set(queue);
  while (queue.length > 0) {
    const k = queue.pop()!;
    for (const next of out.get(k) ?? []) {
      if (seen.has(next)) continue;
      seen.add(next);
      if (status.get(next) === 'green') status.set(next, 'yellow');
      queue.push(next);
    }
  }
  return { edges: verdicts, status, cycles: findCycles(status.keys(), out) };
}

/** Tarjan's strongly connected components, iterative (no recursion depth limit). */
export function findCycles(
  nodes: Iterable<string>,
  out: ReadonlyMap<string, readonly string[]>,
): string[][] {
  let index = 0;
  const idx = new Map<string, number>();
  const low = new Map<string, number>();
  const onStack = new Set<string>();
  const stack: string[] = [];
  const cycles: string[][] = [];
  for (const root of nodes) {
    if (idx.has(root)) continue;
    const work: { node: string; next: number }[] = [{ node: root, next: 0 }];
    idx.set(root, index);
    low.set(root, index++);
    stack.push(root);
    onStack.add(root);
    while (work.length > 0) {
      const frame = work[work.length - 1];
      const succ = out.get(frame.node) ?? [];
      if (frame.next < succ.length) {
        const w = succ[frame.next++];
        if (!idx.has(w)) {
          idx.set(w, index);
          low.set(w, index++);
          stack.push(w);
          onStack.add(w);
          work.push({ node: w, next: 0 });
        } else if (onStack.has(w)) {
          low.set(frame.node, Math.min(low.get(frame.node)!, idx.get(w)!));
        }
        continue;
      }
      work.pop();
      if (work.length > 0) {
        const parent = work[work.length - 1].node;
        low.set(parent, Math.min(low.get(parent)!, low.get(frame.node)!));
      }
      if (low.get(frame.node) === idx.get(frame.node)) {
        const group: string[] = [];
        let w: string;
        do {
          w = stack.pop()!;
          onStack.delete(w);
          group.push(w);
        } while (w !== frame.node);
        const selfLoop = group.length === 1 && (out.get(group[0]) ?? []).includes(group[0]);
        if (group.length > 1 || selfLoop) cycles.push(group.sort());
      }
    }
  }
  return cycles;
}

/**
 * The nodes to apply, producers before consumers (Kahn's algorithm over the subgraph of those
 * nodes and everything between them); nodes caught in a cycle come last, by `rank` (lower
 * first), then in name order.
 */
export function dependencyOrder(
  targets: ReadonlySet<string>,
  edges: readonly GraphEdge[],
  rank: (node: string) => number = () => 0,
): string[] {
  const indeg = new Map<string, number>();
  const out = new Map<string, string[]>();
  for (const t of targets) indeg.set(t, 0);
  for (const e of edges) {
    const p = nodeKey(e.producer);
    const c = nodeKey(e.consumer);
    if (!targets.has(p) || !targets.has(c) || p === c) continue;
    (out.get(p) ?? out.set(p, []).get(p)!).push(c);
    indeg.set(c, (indeg.get(c) ?? 0) + 1);
  }
  const ready = [...indeg]
    .filter(([, d]) => d === 0)
    .map(([k]) => k)
    .sort();
  const order: string[] = [];
  // `ready` is kept sorted, descending, so the next node (smallest name) pops off the end.
  ready.reverse();
  while (ready.length > 0) {
    const k = ready.pop()!;
    order.push(k);
    for (const c of out.get(k) ?? []) {
      const d = indeg.get(c)! - 1;
      indeg.set(c, d);
      if (d === 0) {
        let lo = 0;
        let hi = ready.length;
        while (lo < hi) {
          const mid = (lo + hi) >> 1;
          if (ready[mid] > c) lo = mid + 1;
          else hi = mid;
        }
        ready.splice(lo, 0, c);
      }
    }
  }
  const placed = new Set(order);
  const rest = [...targets]
    .filter((t) => !placed.has(t))
    .sort((a, b) => rank(a) - rank(b) || (a < b ? -1 : a > b ? 1 : 0));
  return [...order, ...rest];
}

const COLORS: Record<NodeStatus, string> = { green: '#2e7d32', red: '#c62828', yellow: '#f9a825' };

export function toDot(
  status: ReadonlyMap<string, NodeStatus>,
  edges: readonly GraphEdge[],
  verdicts: ReadonlyMap<string, EdgeVerdict>,
): string {
  const q = (s: string) => `"${s.replace(/\\/g, '\\\\').replace(/"/g, '\\"')}"`;
  const lines = [
    'digraph statehouse {',
    '  rankdir=LR;',
    '  node [shape=box, style="rounded,filled", fontcolor=white];',
  ];
  for (const [k, s] of [...status].sort()) lines.push(`  ${q(k)} [fillcolor=${q(COLORS[s])}];`);
  for (const e of edges) {
    const v = verdicts.get(e.id);
    const label = v?.status === 'stale' ? `stale: ${v.changed.join(', ')}` : (v?.status ?? 'ok');
    const style = e.source === 'declared' ? ', style=dashed' : '';
    lines.push(
      `  ${q(nodeKey(e.producer))} -> ${q(nodeKey(e.consumer))} [label=${q(label)}${v?.status === 'stale' ? ', color="#c62828"' : ''}${style}];`,
    );
  }
  lines.push('}');
  return lines.join('\n') + '\n';
}

export function toMermaid(
  status: ReadonlyMap<string, NodeStatus>,
  edges: readonly GraphEdge[],
  verdicts: ReadonlyMap<string, EdgeVerdict>,
): string {
  const ids = new Map<string, string>();
  [...status.keys()].sort().forEach((k, i) => ids.set(k, `n${i}`));
  const text = (s: string) => s.replace(/"/g, '#quot;');
  const lines = ['flowchart LR'];
  for (const [k, id] of ids) lines.push(`  ${id}["${text(k)}"]:::${status.get(k)}`);
  for (const e of edges) {
    const v = verdicts.get(e.id);
    const from = ids.get(nodeKey(e.producer));
    const to = ids.get(nodeKey(e.consumer));
    if (!from || !to) continue;
    const arrow = e.source === 'declared' ? '-.->' : '-->';
    const label = v?.status === 'stale' ? `|"stale: ${text(v.changed.join(', '))}"|` : '';
    lines.push(`  ${from} ${arrow}${label} ${to}`);
  }
  lines.push(`  classDef green fill:${COLORS.green},color:#fff`);
  lines.push(`  classDef red fill:${COLORS.red},color:#fff`);
  lines.push(`  classDef yellow fill:${COLORS.yellow},color:#000`);
  return lines.join('\n') + '\n';
}
