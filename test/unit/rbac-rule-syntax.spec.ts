import { UsageError } from '../../src/cli/errors';
import { RULE_SYNTAX, formatRule, parseRule } from '../../src/cli/rbac-rule-syntax';

describe('rbac rule syntax', () => {
  it.each([
    [
      'allow unit.read team-a/**',
      { effect: 'allow', actions: ['unit.read'], resources: ['team-a/**'] },
    ],
    [
      '  deny   unit.delete,unit.purge   **  ',
      { effect: 'deny', actions: ['unit.delete', 'unit.purge'], resources: ['**'] },
    ],
    [
      'allow unit.write */prod ws=prod',
      { effect: 'allow', actions: ['unit.write'], resources: ['*/prod'], workspaces: ['prod'] },
    ],
    [
      'allow unit.read a,b workspaces=prod,*',
      { effect: 'allow', actions: ['unit.read'], resources: ['a', 'b'], workspaces: ['prod', '*'] },
    ],
    [
      'allow\tunit.read\nx\u0000y',
      { effect: 'allow', actions: ['unit.read'], resources: ['x\u0000y'] },
    ],
    [
      'allow unit.read \ud800 ws=\udc00',
      { effect: 'allow', actions: ['unit.read'], resources: ['\ud800'], workspaces: ['\udc00'] },
    ],
  ])('parses %j', (rule, expected) => {
    expect(parseRule(rule)).toEqual(expected);
  });

  it.each([
    ['', `--rule "": expected ${RULE_SYNTAX}`],
    ['allow unit.read', `--rule "allow unit.read": expected ${RULE_SYNTAX}`],
    ['allow a b ws=x extra', `--rule "allow a b ws=x extra": expected ${RULE_SYNTAX}`],
    ['permit a b', '--rule "permit a b": the effect is allow or deny, not permit'],
    ['allow a=b c', `--rule "allow a=b c": expected ${RULE_SYNTAX}`],
    ['allow a ws=c', `--rule "allow a ws=c": expected ${RULE_SYNTAX}`],
    [
      'allow a,,b c',
      '--rule "allow a,,b c": ACTIONS is a comma-separated list without empty items',
    ],
    ['allow a c,', '--rule "allow a c,": RESOURCES is a comma-separated list without empty items'],
    ['allow a c ws=', '--rule "allow a c ws=": ws= is a comma-separated list without empty items'],
    [
      'allow a c prod',
      '--rule "allow a c prod": the fourth word restricts workspaces, ws=WORKSPACES (e.g. ws=prod,dev), not prod',
    ],
  ])('refuses %j', (rule, message) => {
    let thrown: unknown;
    try {
      parseRule(rule);
    } catch (e) {
      thrown = e;
    }
    expect(thrown).toBeInstanceOf(UsageError);
    expect((thrown as UsageError).message).toBe(message);
    expect((thrown as UsageError).exitCode).toBe(2);
  });

  it('formats rules back into the syntax', () => {
    for (const rule of ['allow unit.read,unit.write team-a/**', 'deny unit.write */prod ws=prod']) {
      expect(formatRule(parseRule(rule))).toBe(rule);
    }
    expect(formatRule({ effect: 'allow', actions: ['a'], resources: ['b'], workspaces: [] })).toBe(
      'allow a b',
    );
    expect(
      formatRule({ effect: 'allow', actions: ['a'], resources: ['b'], workspaces: null }),
    ).toBe('allow a b');
  });

  it('stays linear on very long input', () => {
    const n = 200_000;
    const inputs = [
      `allow ${'a,'.repeat(n)}a b`,
      `allow a b ws=${'x'.repeat(n)}`,
      `allow a b ${'w'.repeat(n)}`,
      ' '.repeat(n) + 'x',
      `allow a ${',,'.repeat(n)}`,
    ];
    const start = Date.now();
    for (const input of inputs) {
      try {
        parseRule(input);
      } catch {
        // refusals are fine; only the time matters here
      }
    }
    expect(Date.now() - start).toBeLessThan(2000);
  });
});
