import { Injectable } from '@nestjs/common';
import type { Principal } from '../common/principal';
import { DomainError } from '../common/errors';
import { AuthorizationService } from '../rbac/authorization.service';
import { StateRepository } from '../state/state.repository';
import {
  analyse,
  Analysis,
  dependencyOrder,
  EdgeVerdict,
  GraphEdge,
  NodeRef,
  nodeKey,
  ProducerState,
  toDot,
  toMermaid,
} from './graph-model';
import { EdgeRow, GraphRepository } from './graph.repository';
import {
  edgeView,
  EdgeView,
  GraphView,
  InputView,
  StaleItemView,
  StaleView,
  toGraphEdge,
  UnitStatusView,
  consumerOf,
  nodeOf,
  producerOf,
} from './graph.views';

const refOf = (k: string): NodeRef => {
  const at = k.lastIndexOf('#');
  return { unit: k.slice(0, at), workspace: k.slice(at + 1) };
};

/**
 * The dependency graph's read models — the graph, a state's status, what is stale — over the
 * edges declared through the API (`DeclaredEdgesService`) and those discovered from consumers'
 * `terraform_remote_state` data sources (recorded by `GraphWriteHook` in the consumer's own
 * write transaction). Every answer is filtered by `graph.read`; statuses are computed over the
 * whole graph so a hidden upstream still turns a visible state yellow, without being named.
 */
@Injectable()
export class GraphService {
  constructor(
    private readonly repo: GraphRepository,
    private readonly states: StateRepository,
    private readonly authz: AuthorizationService,
  ) {}

  /** The view of one edge (a just-declared one), with its verdict against its producer's state. */
  async edgeViewOf(row: EdgeRow): Promise<EdgeView> {
    const producers = await this.producerStates([row]);
    return edgeView(toGraphEdge(row), analyse([], [toGraphEdge(row)], producers).edges, row);
  }

  async graph(
    principal: Principal,
    prefix: string,
  ): Promise<{ view: GraphView; analysis: Analysis; edges: GraphEdge[] }> {
    const rows = await this.repo.edges('');
    const edges = rows.map(toGraphEdge);
    const producers = await this.producerStates(rows, true); // every node's current version
    const analysis = analyse([], edges, producers);
    const sees = this.visibility(principal);
    const inPrefix = (n: NodeRef) => n.unit.startsWith(prefix);
    const shown: EdgeView[] = [];
    const nodes = new Set<string>();
    for (const [i, e] of edges.entries()) {
      if (!inPrefix(e.producer) && !inPrefix(e.consumer)) continue;
      if (!(await sees(e.producer)) || !(await sees(e.consumer))) continue;
      shown.push(edgeView(e, analysis.edges, rows[i]));
      nodes.add(nodeKey(e.producer));
      nodes.add(nodeKey(e.consumer));
    }
    const view: GraphView = {
      nodes: [...nodes].sort().map((k) => ({
        ...refOf(k),
        status: analysis.status.get(k) ?? 'green',
        version: producers.get(k)?.version ?? null,
      })),
      edges: shown,
      cycles: await this.visibleCycles(analysis.cycles, sees, (c) => c.some((k) => nodes.has(k))),
    };
    return { view, analysis, edges };
  }

  /** The graph as Graphviz DOT or Mermaid, for people: the same nodes and edges as the JSON. */
  async render(principal: Principal, prefix: string, format: 'dot' | 'mermaid'): Promise<string> {
    const { view, analysis, edges } = await this.graph(principal, prefix);
    const shownIds = new Set(view.edges.map((e) => e.id));
    const status = new Map(view.nodes.map((n) => [nodeKey(n), n.status]));
    const shown = edges.filter((e) => shownIds.has(e.id));
    return format === 'dot'
      ? toDot(status, shown, analysis.edges)
      : toMermaid(status, shown, analysis.edges);
  }

  async unitStatus(principal: Principal, unit: string, workspace: string): Promise<UnitStatusView> {
    const node = nodeOf({ unit, workspace });
    await this.authz.authorize(principal, 'graph.read', node);
    if (!(await this.states.unitExists(node.unit))) {
      throw new DomainError('unit_not_found', `unit ${node.unit} does not exist`);
    }
    const rows = await this.repo.upstreamEdges(node);
    const edges = rows.map(toGraphEdge);
    const producers = await this.producerStates(rows);
    const analysis = analyse([nodeKey(node)], edges, producers);
    const sees = this.visibility(principal);
    const key = nodeKey(node);
    const found: { view: InputView; edge: GraphEdge; row: EdgeRow }[] = [];
    for (const [i, e] of edges.entries()) {
      if (nodeKey(e.consumer) !== key) continue;
      found.push({
        view: await this.inputView(e, analysis.edges.get(e.id), sees),
        edge: e,
        row: rows[i],
      });
    }
    await this.fillStaleSince(found);
    const inputs = found.map((x) => x.view);
    const redUpstream: NodeRef[] = [];
    let hiddenRedUpstream = 0;
    const status = analysis.status.get(key) ?? 'green';
    if (status === 'yellow') {
      for (const [k, s] of analysis.status) {
        if (s !== 'red' || k === key) continue;
        if (await sees(refOf(k))) redUpstream.push(refOf(k));
        else hiddenRedUpstream++;
      }
    }
    return {
      ...node,
      status,
      inputs,
      redUpstream: redUpstream.sort((a, b) => nodeKey(a).localeCompare(nodeKey(b))),
      hiddenRedUpstream,
      cycles: await this.visibleCycles(analysis.cycles, sees, (c) => c.includes(key)),
    };
  }

  /** What needs applying: red states (a stale input) and yellow ones (red upstream), producers first. */
  async stale(principal: Principal, prefix: string): Promise<StaleView> {
    const rows = await this.repo.edges('');
    const edges = rows.map(toGraphEdge);
    const producers = await this.producerStates(rows);
    const analysis = analyse([], edges, producers);
    const sees = this.visibility(principal);
    const targets = new Set<string>();
    for (const [k, s] of analysis.status) {
      if (s === 'green' || !k.startsWith(prefix)) continue;
      if (await sees(refOf(k))) targets.add(k);
    }
    const byConsumer = new Map<string, number[]>();
    edges.forEach((e, i) => {
      const c = nodeKey(e.consumer);
      if (targets.has(c)) (byConsumer.get(c) ?? byConsumer.set(c, []).get(c)!).push(i);
    });
    const items: StaleItemView[] = [];
    const all: { view: InputView; edge: GraphEdge; row: EdgeRow }[] = [];
    // In a cycle there is no right order: the states with a stale input go first.
    const rank = (k: string) => (analysis.status.get(k) === 'red' ? 0 : 1);
    for (const k of dependencyOrder(targets, edges, rank)) {
      const inputs: InputView[] = [];
      for (const i of byConsumer.get(k) ?? []) {
        const v = analysis.edges.get(edges[i].id);
        if (v?.status !== 'stale') continue;
        const view = await this.inputView(edges[i], v, sees);
        all.push({ view, edge: edges[i], row: rows[i] });
        inputs.push(view);
      }
      items.push({ ...refOf(k), status: analysis.status.get(k) as 'red' | 'yellow', inputs });
    }
    await this.fillStaleSince(all);
    return {
      items,
      cycles: await this.visibleCycles(analysis.cycles, sees, (c) => c.some((k) => targets.has(k))),
    };
  }

  // ------------------------------------------------------------------ helpers

  /** graph.read on a node, asked once per node per answer. */
  private visibility(principal: Principal): (n: NodeRef) => Promise<boolean> {
    const seen = new Map<string, Promise<boolean>>();
    return (n) => {
      const k = nodeKey(n);
      let p = seen.get(k);
      if (!p) {
        p = this.authz.can(principal, 'graph.read', n);
        seen.set(k, p);
      }
      return p;
    };
  }

  /** Cycles the caller may see whole (a cycle through a hidden state is not named). */
  private async visibleCycles(
    cycles: string[][],
    sees: (n: NodeRef) => Promise<boolean>,
    relevant: (cycle: string[]) => boolean,
  ): Promise<NodeRef[][]> {
    const out: NodeRef[][] = [];
    for (const c of cycles) {
      if (!relevant(c)) continue;
      let all = true;
      for (const k of c) all = all && (await sees(refOf(k)));
      if (all) out.push(c.map(refOf));
    }
    return out;
  }

  /** Current versions and output digests of the edges' producers (and consumers: `both`). */
  private async producerStates(rows: EdgeRow[], both = false): Promise<Map<string, ProducerState>> {
    const wanted = new Map<string, NodeRef>();
    for (const r of rows) {
      wanted.set(nodeKey(producerOf(r)), producerOf(r));
      if (both) wanted.set(nodeKey(consumerOf(r)), consumerOf(r));
    }
    const out = new Map<string, ProducerState>();
    for (const p of await this.states.currentOutputs([...wanted.values()])) {
      out.set(nodeKey(p), {
        version: p.version,
        digests: p.output_digests ?? {},
        sensitive: p.sensitive_outputs ?? [],
      });
    }
    return out;
  }

  /** An input as answers show it (`staleSince` is filled in by `fillStaleSince`). */
  private async inputView(
    e: GraphEdge,
    v: EdgeVerdict | undefined,
    sees: (n: NodeRef) => Promise<boolean>,
  ): Promise<InputView> {
    const visible = await sees(e.producer);
    return {
      edge: visible ? e.id : null,
      producer: visible ? e.producer : { hidden: true },
      source: e.source,
      name: visible ? e.name : null,
      status: v?.status ?? 'unknown',
      changed: visible ? (v?.changed ?? []) : [],
      staleSince: null,
      sensitiveOutputs: e.sensitiveExcluded ? 'excluded' : 'compared',
    };
  }

  /** Where each visible stale input went stale: the first producer version that differs. */
  private async fillStaleSince(
    inputs: { view: InputView; edge: GraphEdge; row: EdgeRow }[],
  ): Promise<void> {
    const todo = inputs.filter(
      (x) => x.view.status === 'stale' && x.view.edge !== null && x.row.producer_version !== null,
    );
    const since = await this.states.firstChangedVersions(
      todo.map((x) => ({
        state: x.edge.producer,
        after: x.row.producer_version as number,
        recorded: Object.fromEntries(x.view.changed.map((n) => [n, x.edge.recorded[n] ?? null])),
        excluded: x.edge.sensitiveExcluded,
      })),
    );
    todo.forEach((x, i) => (x.view.staleSince = since[i]));
  }
}
