/**
 * The README's "Metrics" section against the metrics the server declares: every metric is
 * described there, and every PromQL expression of its example rules (and the dashboard query)
 * parses, names only declared metrics, and matches only their labels with allowed values — so
 * an alert copied from the README cannot silently match nothing.
 */
import { parser } from '@prometheus-io/lezer-promql';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { METRIC_LABELS } from '../../src/metrics/metrics.service';
import { metricOf } from '../support/metrics';
import { ROOT } from '../support/paths';

const README = readFileSync(join(ROOT, 'README.md'), 'utf8');
const SECTION = /\n## Metrics\n([\s\S]*?)\n## /.exec(README)?.[1] ?? '';
const DECLARED: Record<string, Record<string, readonly string[] | 'route' | 'any'>> = METRIC_LABELS;

/** The expressions of the section: `expr:` lines of its YAML, and inline `histogram_quantile`s. */
function expressions(): string[] {
  const exprs = [...SECTION.matchAll(/^\s*expr: (.+)$/gm)].map((m) => m[1].trim());
  const inline = [...SECTION.matchAll(/`(histogram_quantile\(.+?)`/g)].map((m) => m[1]);
  return [...exprs, ...inline];
}

interface Selector {
  metric: string;
  matchers: { label: string; op: string; value: string }[];
}

/** Parses a PromQL expression; throws on a syntax error, answers its vector selectors. */
function selectorsOf(expr: string): Selector[] {
  const tree = parser.parse(expr);
  const selectors: Selector[] = [];
  let error: number | undefined;
  tree.iterate({
    enter: (n) => {
      if (n.type.isError) error ??= n.from;
      if (n.name !== 'VectorSelector') return;
      const node = n.node;
      const id = node.getChild('Identifier');
      const matchers = node
        .getChild('LabelMatchers')
        ?.getChildren('UnquotedLabelMatcher')
        .map((m) => {
          const text = (c: string) => {
            const child = m.getChild(c);
            return child ? expr.slice(child.from, child.to) : '';
          };
          return {
            label: text('LabelName'),
            op: text('MatchOp'),
            value: JSON.parse(text('StringLiteral')) as string,
          };
        });
      if (id) selectors.push({ metric: expr.slice(id.from, id.to), matchers: matchers ?? [] });
    },
  });
  if (error !== undefined) throw new Error(`PromQL syntax error at ${error}: ${expr}`);
  return selectors;
}

describe('the README on metrics', () => {
  it('has the section, with a marker before each of its code blocks', () => {
    expect(SECTION).not.toBe('');
    const lines = SECTION.split('\n');
    lines.forEach((line, i) => {
      if (!/^```\S/.test(line)) return;
      let before = i - 1;
      while (before >= 0 && lines[before].trim() === '') before--;
      expect(`${lines[before]}\n${line}`).toMatch(/^<!-- example: [^\n]+ -->\n/);
    });
  });

  it('describes every metric the server exposes', () => {
    for (const name of Object.keys(METRIC_LABELS)) {
      const short = name.replace(/^statehouse_db_pool_/, '_');
      expect(
        `${name}: ${SECTION.includes(`\`${name}\``) || SECTION.includes(`\`${short}\``)}`,
      ).toBe(`${name}: true`);
    }
  });

  it('gives at least the stale-lock, auth-failure, 5xx and audit-loss alerts', () => {
    for (const alert of ['StaleLock', 'AuthFailureSpike', 'ServerErrors', 'AuditEventsLost']) {
      expect(SECTION).toContain(`alert: Statehouse${alert}`);
    }
  });

  it('writes only PromQL that parses and selects declared metrics by declared labels', () => {
    const exprs = expressions();
    expect(exprs.length).toBeGreaterThanOrEqual(5);
    for (const expr of exprs) {
      const selectors = selectorsOf(expr);
      expect(selectors.length).toBeGreaterThan(0);
      for (const { metric, matchers } of selectors) {
        const base = metricOf(metric);
        const labels = DECLARED[base];
        expect(`${metric} declared: ${labels !== undefined}`).toBe(`${metric} declared: true`);
        for (const { label, op, value } of matchers) {
          const allowed = labels[label];
          expect(`${metric}{${label}} declared: ${allowed !== undefined}`).toBe(
            `${metric}{${label}} declared: true`,
          );
          if (Array.isArray(allowed) && (op === '=' || op === '!=')) {
            expect(allowed).toContain(value);
          }
        }
      }
    }
  });

  it('rejects PromQL that does not parse (the check itself works)', () => {
    expect(() => selectorsOf('sum(rate(statehouse_locks_held[5m]) by')).toThrow(/syntax error/);
  });
});
