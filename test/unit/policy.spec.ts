import fc from 'fast-check';
import {
  compileGlob,
  compileRule,
  decide,
  decideUnitWide,
  globProblem,
  Rule,
  UNIT_WIDE_OPERATIONS,
} from '../../src/rbac/policy';

const rules = (...rs: Omit<Rule, 'id'>[]) => rs.map((r, i) => compileRule({ id: `r${i}`, ...r }));

describe('glob patterns over unit names', () => {
  it.each([
    ['team-a/**', 'team-a/network', true],
    ['team-a/**', 'team-a/network/prod', true],
    ['team-a/**', 'team-a', false],
    ['team-a/**', 'team-ab/network', false],
    ['*/prod', 'team/prod', true],
    ['*/prod', 'prod', false],
    ['*/prod', 'a/b/prod', false],
    ['**/prod', 'a/b/prod', true],
    ['**', 'anything/at/all', true],
    ['team-*/net*', 'team-a/network', true],
    ['team-*/net*', 'team/network', false],
    ['a*b*c', 'aXbYc', true],
    ['a*b*c', 'acb', false],
    ['shared/network', 'shared/network', true],
    ['shared/network', 'shared/network2', false],
    ['*', '*', true],
  ])('%s matches %s: %s', (pattern, name, expected) => {
    expect(compileGlob(pattern).matches(name)).toBe(expected);
  });

  it('treats regex metacharacters as literals (no regex injection)', () => {
    expect(compileGlob('team.a/(x|y)+').matches('team.a/(x|y)+')).toBe(true);
    expect(compileGlob('team.a/(x|y)+').matches('teamXa/x')).toBe(false);
    expect(compileGlob('a[bc]').matches('ab')).toBe(false);
  });

  it('refuses malformed patterns', () => {
    expect(globProblem('')).toMatch(/empty/);
    expect(globProblem('a//b')).toMatch(/empty segment/);
    expect(globProblem('a/**b')).toMatch(/whole segment/);
    expect(globProblem('x'.repeat(600))).toMatch(/longer/);
  });

  it('stays fast on adversarial patterns (no catastrophic backtracking)', () => {
    const g = compileGlob('**/**/**/**/**/**/**/**/x');
    const name = Array.from({ length: 40 }, () => 'a').join('/');
    const t0 = Date.now();
    expect(g.matches(name)).toBe(false);
    expect(Date.now() - t0).toBeLessThan(2000);
    const star = compileGlob('*a*a*a*a*a*a*a*a*b');
    expect(star.matches('a'.repeat(5000))).toBe(false);
  });

  it('a segment glob agrees with a reference regex on random inputs', () => {
    fc.assert(
      fc.property(
        fc.stringMatching(/^[ab*]{1,8}$/),
        fc.stringMatching(/^[ab]{0,10}$/),
        (raw, value) => {
          const pattern = raw.replace(/\*+/g, '*');
          const re = new RegExp(`^${pattern.replace(/\*+/g, '.*')}$`);
          expect(compileGlob(pattern).matches(value === '' ? 'x' : value)).toBe(
            re.test(value === '' ? 'x' : value),
          );
        },
      ),
      { numRuns: 3000 },
    );
  });
});

describe('decisions', () => {
  it('no matching allow is a deny', () => {
    expect(
      decide(
        rules({ effect: 'allow', actions: ['unit.read'], resources: ['team-a/**'] }),
        'unit.read',
        { unit: 'team-b/x' },
      ),
    ).toEqual({ allowed: false });
  });

  it('explicit deny beats any allow, wherever it stands', () => {
    const rs = rules(
      { effect: 'allow', actions: ['unit.read', 'unit.write'], resources: ['**'] },
      { effect: 'deny', actions: ['unit.write'], resources: ['shared/**'] },
    );
    expect(decide(rs, 'unit.write', { unit: 'team/x' }).allowed).toBe(true);
    const d = decide(rs, 'unit.write', { unit: 'shared/network' });
    expect(d.allowed).toBe(false);
    expect(d.rule?.id).toBe('r1');
    expect(decide(rs, 'unit.read', { unit: 'shared/network' }).allowed).toBe(true);
  });

  it('a workspace-restricted rule applies only in those workspaces', () => {
    const rs = rules({
      effect: 'allow',
      actions: ['unit.write'],
      resources: ['*/prod'],
      workspaces: ['prod'],
    });
    expect(decide(rs, 'unit.write', { unit: 'net/prod', workspace: 'prod' }).allowed).toBe(true);
    expect(decide(rs, 'unit.write', { unit: 'net/prod', workspace: 'dev' }).allowed).toBe(false);
    expect(decide(rs, 'unit.write', { unit: 'net/prod' }).allowed).toBe(false);
  });

  it('actions must be listed by the rule', () => {
    const rs = rules({ effect: 'allow', actions: ['outputs.read'], resources: ['shared/network'] });
    expect(decide(rs, 'outputs.read', { unit: 'shared/network' }).allowed).toBe(true);
    expect(decide(rs, 'unit.read', { unit: 'shared/network' }).allowed).toBe(false);
  });
});

describe('unit-wide actions (deleting, undeleting or purging a whole unit)', () => {
  const UNIT = 'team-c/app';
  const WORKSPACES = ['default', 'prod', 'staging'];
  const operations = Object.entries(UNIT_WIDE_OPERATIONS);

  it('covers delete, undelete and purge of a unit', () => {
    expect(UNIT_WIDE_OPERATIONS).toEqual({
      'delete a unit': 'unit.delete',
      'undelete a unit': 'unit.delete',
      'purge a unit': 'unit.purge',
    });
  });

  describe.each(operations)('%s (%s)', (_operation, action) => {
    it('is allowed by a unit-level allow with no deny in any workspace', () => {
      const rs = rules({ effect: 'allow', actions: [action], resources: ['team-c/**'] });
      const d = decideUnitWide(rs, action, UNIT, WORKSPACES);
      expect(d).toMatchObject({ allowed: true, rule: { id: 'r0' } });
      expect(d.workspace).toBeUndefined();
    });

    it('is refused by a deny scoped to one workspace, naming that workspace and the deny', () => {
      const rs = rules(
        { effect: 'allow', actions: [action], resources: ['team-c/**'] },
        { effect: 'deny', actions: [action], resources: [UNIT], workspaces: ['prod'] },
      );
      // the workspace-scoped decisions are unchanged: only prod is denied
      expect(decide(rs, action, { unit: UNIT, workspace: 'staging' }).allowed).toBe(true);
      expect(decide(rs, action, { unit: UNIT, workspace: 'prod' }).allowed).toBe(false);
      expect(decideUnitWide(rs, action, UNIT, WORKSPACES)).toMatchObject({
        allowed: false,
        rule: { id: 'r1', effect: 'deny' },
        workspace: 'prod',
      });
    });

    it('is refused by a workspace deny given as a glob', () => {
      const rs = rules(
        { effect: 'allow', actions: [action], resources: ['**'] },
        { effect: 'deny', actions: [action], resources: ['team-c/*'], workspaces: ['pr*'] },
      );
      expect(decideUnitWide(rs, action, UNIT, WORKSPACES)).toMatchObject({
        allowed: false,
        workspace: 'prod',
      });
      expect(decideUnitWide(rs, action, UNIT, ['default', 'staging']).allowed).toBe(true);
    });

    it('counts every workspace it is given (the caller passes the soft-deleted ones too)', () => {
      const rs = rules(
        { effect: 'allow', actions: [action], resources: ['**'] },
        { effect: 'deny', actions: [action], resources: [UNIT], workspaces: ['old'] },
      );
      expect(decideUnitWide(rs, action, UNIT, ['default']).allowed).toBe(true);
      expect(decideUnitWide(rs, action, UNIT, ['default', 'old'])).toMatchObject({
        allowed: false,
        workspace: 'old',
      });
    });

    it('is not granted by an allow limited to workspaces, even one that lists them all', () => {
      const rs = rules({
        effect: 'allow',
        actions: [action],
        resources: ['team-c/**'],
        workspaces: ['*'],
      });
      expect(decide(rs, action, { unit: UNIT, workspace: 'prod' }).allowed).toBe(true);
      const d = decideUnitWide(rs, action, UNIT, WORKSPACES);
      expect(d).toEqual({ allowed: false });
    });

    it('is refused by a unit-level deny, and without any allow, before any workspace counts', () => {
      const denied = rules(
        { effect: 'allow', actions: [action], resources: ['**'] },
        { effect: 'deny', actions: [action], resources: [UNIT] },
      );
      expect(decideUnitWide(denied, action, UNIT, [])).toMatchObject({
        allowed: false,
        rule: { id: 'r1' },
      });
      expect(decideUnitWide(denied, action, UNIT, []).workspace).toBeUndefined();
      expect(decideUnitWide(rules(), action, UNIT, WORKSPACES)).toEqual({ allowed: false });
    });

    it('a deny of another action in a workspace does not stop it', () => {
      const rs = rules(
        { effect: 'allow', actions: [action], resources: ['**'] },
        { effect: 'deny', actions: ['unit.read'], resources: [UNIT], workspaces: ['prod'] },
      );
      expect(decideUnitWide(rs, action, UNIT, WORKSPACES).allowed).toBe(true);
    });
  });
});
