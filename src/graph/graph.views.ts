import { assertUnitName, assertWorkspace } from '../common/names';
import type { EdgeVerdict, GraphEdge, NodeRef } from './graph-model';
import type { EdgeRow } from './graph.repository';

/** The graph's answers, as the API shows them, and how rows and verdicts become them. */

/** How an edge treats the producer's sensitive outputs (see GraphEdge.sensitiveExcluded). */
export type SensitiveOutputs = 'compared' | 'excluded';

/** A node as answers show it: its name, or nothing for a node the caller may not see. */
export type NodeView = NodeRef | { hidden: true };

export interface EdgeView {
  id: string;
  producer: NodeRef;
  consumer: NodeRef;
  source: 'declared' | 'discovered';
  name: string;
  outputs: string[] | null;
  input: string | null;
  status: 'ok' | 'stale' | 'unknown';
  /** Outputs whose current value differs from what the consumer read. */
  changed: string[];
  /** The producer version whose outputs the consumer read (null when no kept version matches). */
  producerVersion: number | null;
  /** `excluded`: judged on the outputs the edge's author may read, sensitive ones left out. */
  sensitiveOutputs: SensitiveOutputs;
  recordedAt: string;
}

export interface InputView {
  edge: string | null;
  producer: NodeView;
  source: 'declared' | 'discovered';
  name: string | null;
  status: 'ok' | 'stale' | 'unknown';
  changed: string[];
  /** The first producer version whose outputs differ from what was read (stale edges). */
  staleSince: number | null;
  sensitiveOutputs: SensitiveOutputs;
}

export interface UnitStatusView {
  unit: string;
  workspace: string;
  status: 'green' | 'red' | 'yellow';
  inputs: InputView[];
  /** For yellow: the red states upstream that make it so (hidden ones are counted). */
  redUpstream: NodeRef[];
  hiddenRedUpstream: number;
  cycles: NodeRef[][];
}

export interface GraphView {
  nodes: {
    unit: string;
    workspace: string;
    status: 'green' | 'red' | 'yellow';
    version: number | null;
  }[];
  edges: EdgeView[];
  cycles: NodeRef[][];
}

export interface StaleItemView {
  unit: string;
  workspace: string;
  status: 'red' | 'yellow';
  inputs: InputView[];
}

export interface StaleView {
  items: StaleItemView[];
  cycles: NodeRef[][];
}

/** A stored edge as the graph model sees it. */
export function toGraphEdge(r: EdgeRow): GraphEdge {
  return {
    id: r.id,
    producer: { unit: r.producer_unit, workspace: r.producer_workspace },
    consumer: { unit: r.consumer_unit, workspace: r.consumer_workspace },
    source: r.source,
    name: r.name,
    outputs: r.outputs,
    input: r.input,
    recorded: r.recorded ?? {},
    sensitiveExcluded: r.sensitive_excluded,
    recordedAt: new Date(r.recorded_at).toISOString(),
  };
}

/** An edge as answers show it, with its verdict (`unknown` when none was reached). */
export function edgeView(
  e: GraphEdge,
  verdicts: ReadonlyMap<string, EdgeVerdict>,
  row: EdgeRow,
): EdgeView {
  const v = verdicts.get(e.id);
  return {
    id: e.id,
    producer: e.producer,
    consumer: e.consumer,
    source: e.source,
    name: e.name,
    outputs: e.outputs,
    input: e.input,
    status: v?.status ?? 'unknown',
    changed: v?.changed ?? [],
    producerVersion: row.producer_version,
    sensitiveOutputs: e.sensitiveExcluded ? 'excluded' : 'compared',
    recordedAt: e.recordedAt,
  };
}

/** A state named in a request (the workspace defaults to `default`), checked. */
export function nodeOf(n: { unit: string; workspace?: string }): NodeRef {
  return { unit: assertUnitName(n.unit), workspace: assertWorkspace(n.workspace) };
}

export const producerOf = (r: EdgeRow): NodeRef => ({
  unit: r.producer_unit,
  workspace: r.producer_workspace,
});
export const consumerOf = (r: EdgeRow): NodeRef => ({
  unit: r.consumer_unit,
  workspace: r.consumer_workspace,
});
