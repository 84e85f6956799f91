import { METRIC_LABELS } from '../../src/metrics/metrics.service';
import {
  BACKEND_OPERATIONS,
  S3_OPERATIONS,
  UNROUTED_OPERATION,
} from '../../src/metrics/metric-labels';

/** One sample line of the Prometheus text format. */
export interface Sample {
  /** The series name as written (`…_bucket`, `…_sum`, `…_count` for histograms). */
  name: string;
  labels: Record<string, string>;
  value: number;
}

const SAMPLE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/;
const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;

/** The samples of a scrape (comments skipped); throws on a line that is not a sample. */
export function parseExposition(text: string): Sample[] {
  const samples: Sample[] = [];
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const m = SAMPLE.exec(line);
    if (!m) throw new Error(`not a sample line: ${line}`);
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? '').matchAll(LABEL)) labels[l[1]] = l[2].replace(/\\(.)/g, '$1');
    samples.push({ name: m[1], labels, value: Number(m[3]) });
  }
  return samples;
}

/** The metric a series belongs to (a histogram's `_bucket`, `_sum` and `_count` are its own). */
export function metricOf(seriesName: string): string {
  for (const suffix of ['_bucket', '_sum', '_count']) {
    const base = seriesName.slice(0, -suffix.length);
    if (seriesName.endsWith(suffix) && base in METRIC_LABELS) return base;
  }
  return seriesName;
}

/** One sample's value, or undefined when the series is not there. */
export function valueOf(
  samples: Sample[],
  name: string,
  labels: Record<string, string> = {},
): number | undefined {
  const want = Object.entries(labels);
  const found = samples.find(
    (s) =>
      s.name === name &&
      Object.keys(s.labels).length === want.length &&
      want.every(([k, v]) => s.labels[k] === v),
  );
  return found?.value;
}

/**
 * Every `statehouse_*` series must be a declared metric with exactly its declared label names
 * (plus `le` on histogram buckets), each value from its allowed set. `apiRoutes` holds the
 * management API's operations that may appear (`GET /v1/units/:name`, …). Answers the problems.
 */
export function labelProblems(samples: Sample[], apiRoutes: ReadonlySet<string>): string[] {
  const problems: string[] = [];
  const declared: Record<
    string,
    Record<string, readonly string[] | 'route' | 'any'>
  > = METRIC_LABELS;
  for (const s of samples) {
    if (!s.name.startsWith('statehouse_')) continue;
    const metric = metricOf(s.name);
    const allowed = declared[metric];
    if (!allowed) {
      problems.push(`${s.name}: not a declared metric`);
      continue;
    }
    const names = Object.keys(s.labels).filter((n) => !(n === 'le' && s.name.endsWith('_bucket')));
    const expected = Object.keys(allowed);
    if (names.sort().join(',') !== [...expected].sort().join(',')) {
      problems.push(`${s.name}: labels ${names.join(',')}, expected ${expected.join(',')}`);
      continue;
    }
    for (const [label, values] of Object.entries(allowed)) {
      const v = s.labels[label];
      if (values === 'any') continue;
      const ok =
        values === 'route' ? operationAllowed(s.labels.door, v, apiRoutes) : values.includes(v);
      if (!ok) problems.push(`${s.name}: ${label}="${v}" is not an allowed value`);
    }
  }
  return problems;
}

function operationAllowed(
  door: string,
  operation: string,
  apiRoutes: ReadonlySet<string>,
): boolean {
  if (operation === UNROUTED_OPERATION) return true;
  switch (door) {
    case 's3':
      return (S3_OPERATIONS as readonly string[]).includes(operation);
    case 'backend':
      return (BACKEND_OPERATIONS as readonly string[]).includes(operation);
    case 'api':
      return apiRoutes.has(operation);
    default:
      return false;
  }
}
