import type { Command } from 'commander';
import { UsageError } from '../errors';
import { note, orDash, out, printJson, table, when } from '../output';
import { handled } from '../run';
import { clientFor } from '../session';
import { unitPath } from './unit';

// `statehouse graph …` and `statehouse unit status`: the dependency graph over /v1/graph and
// /v1/units/{name}/status (see openapi/openapi.json). Everything shown is what the caller may
// `graph.read`; a producer it may not see is shown as `(hidden)`.

interface Ref {
  unit: string;
  workspace: string;
}

interface Input {
  edge: string | null;
  producer: Ref | { hidden: true };
  source: string;
  name: string | null;
  status: string;
  changed: string[];
  staleSince: number | null;
  /** `excluded`: judged without the producer's sensitive outputs (the author may not read them). */
  sensitiveOutputs?: 'compared' | 'excluded';
}

interface UnitStatus extends Ref {
  status: 'green' | 'red' | 'yellow';
  inputs: Input[];
  redUpstream: Ref[];
  hiddenRedUpstream: number;
  cycles: Ref[][];
}

interface GraphAnswer {
  nodes: (Ref & { status: string; version: number | null })[];
  edges: {
    id: string;
    producer: Ref;
    consumer: Ref;
    source: string;
    name: string;
    status: string;
    changed: string[];
    recordedAt: string;
  }[];
  cycles: Ref[][];
}

interface StaleAnswer {
  items: (Ref & { status: 'red' | 'yellow'; inputs: Input[] })[];
  cycles: Ref[][];
}

const FORMATS = ['json', 'dot', 'mermaid', 'table'] as const;

const ref = (r: Ref | { hidden: true }): string =>
  'hidden' in r ? '(hidden)' : r.workspace === 'default' ? r.unit : `${r.unit} [${r.workspace}]`;

function why(i: Input): string {
  const excluded = i.sensitiveOutputs === 'excluded' ? ' (sensitive outputs not compared)' : '';
  if (i.status !== 'stale') return `${i.status}${excluded}`;
  const since = i.staleSince === null ? '' : ` since version ${i.staleSince}`;
  return `stale: ${i.changed.join(', ')} changed${since}${excluded}`;
}

function printCycles(cycles: Ref[][]): void {
  for (const c of cycles) note(`cycle: ${c.map(ref).join(' -> ')} (reported, not followed)`);
}

async function graph(
  opts: { prefix?: string; format?: string; json?: boolean },
  cmd: Command,
): Promise<void> {
  const format = opts.json ? 'json' : (opts.format ?? 'table');
  if (!(FORMATS as readonly string[]).includes(format)) {
    throw new UsageError(`--format must be one of ${FORMATS.join(', ')}`);
  }
  const client = clientFor(cmd);
  if (format === 'dot' || format === 'mermaid') {
    const res = await client.send('GET', '/v1/graph', {
      query: { prefix: opts.prefix, format },
    });
    out(await res.text());
    return;
  }
  const g = await client.json<GraphAnswer>('GET', '/v1/graph', { query: { prefix: opts.prefix } });
  if (format === 'json') {
    printJson(g);
    return;
  }
  if (g.edges.length === 0) {
    note(opts.prefix ? `No edges touch ${opts.prefix}.` : 'No edges.');
    return;
  }
  const status = new Map(g.nodes.map((n) => [`${n.unit}#${n.workspace}`, n.status]));
  out(
    table(
      ['PRODUCER', 'CONSUMER', 'CONSUMER STATUS', 'EDGE', 'SOURCE', 'RECORDED'],
      g.edges.map((e) => [
        ref(e.producer),
        ref(e.consumer),
        orDash(status.get(`${e.consumer.unit}#${e.consumer.workspace}`)),
        e.status === 'stale' ? `stale: ${e.changed.join(', ')}` : e.status,
        `${e.source} (${e.name})`,
        when(e.recordedAt),
      ]),
    ),
  );
  printCycles(g.cycles);
}

async function stale(opts: { prefix?: string; json?: boolean }, cmd: Command): Promise<void> {
  const s = await clientFor(cmd).json<StaleAnswer>('GET', '/v1/graph/stale', {
    query: { prefix: opts.prefix },
  });
  if (opts.json) {
    printJson(s);
    return;
  }
  if (s.items.length === 0) note('Nothing is stale.');
  else {
    note('Apply in this order (producers first):');
    out(
      table(
        ['#', 'STATE', 'STATUS', 'WHY'],
        s.items.map((item, i) => [
          String(i + 1),
          ref(item),
          item.status,
          item.status === 'yellow'
            ? 'something upstream is red'
            : item.inputs.map((x) => `${ref(x.producer)}: ${why(x)}`).join('; '),
        ]),
      ),
    );
  }
  printCycles(s.cycles);
}

async function unitStatus(
  name: string,
  opts: { workspace: string; json?: boolean },
  cmd: Command,
): Promise<void> {
  const s = await clientFor(cmd).json<UnitStatus>('GET', unitPath(name, '/status'), {
    query: { workspace: opts.workspace },
  });
  if (opts.json) {
    printJson(s);
  } else {
    out(`${ref(s)}: ${s.status}`);
    if (s.inputs.length > 0) {
      out(
        table(
          ['INPUT FROM', 'DATA SOURCE', 'STATUS'],
          s.inputs.map((i) => [ref(i.producer), `${i.source} (${orDash(i.name)})`, why(i)]),
        ),
      );
    }
    if (s.status === 'yellow') {
      const names = s.redUpstream.map(ref);
      if (s.hiddenRedUpstream > 0) names.push(`${s.hiddenRedUpstream} you may not see`);
      out(`red upstream: ${names.join(', ')}`);
    }
    printCycles(s.cycles);
  }
  // Scripts can test the colour: 0 green, 3 yellow, 4 red.
  process.exitCode = s.status === 'green' ? 0 : s.status === 'yellow' ? 3 : 4;
}

export function registerGraphCommands(program: Command): void {
  const g = program
    .command('graph')
    .description('the dependency graph: which state feeds which, and what is stale')
    .option('--prefix <prefix>', 'only edges with an end whose unit starts with this')
    .option('--format <format>', `one of ${FORMATS.join(', ')} (default table)`)
    .option('--json', 'same as --format json')
    .action(handled(graph));
  g.command('stale')
    .description('what needs applying, in dependency order, and why')
    .option('--prefix <prefix>', 'only states whose unit starts with this')
    .option('--json', 'print JSON')
    .action(handled(stale));
}

/** `statehouse unit status NAME`: added to the `unit` command. */
export function registerUnitStatusCommand(unit: Command): void {
  unit
    .command('status <name>')
    .description(
      'green (inputs current), red (an input is stale) or yellow (something upstream is red); exit 0, 4 or 3',
    )
    .option('-w, --workspace <workspace>', 'workspace', 'default')
    .option('--json', 'print JSON')
    .action(handled(unitStatus));
}
