import {
  assertUnitName,
  assertWorkspace,
  DEFAULT_WORKSPACE,
  MAX_UNIT_NAME_LENGTH,
  MAX_WORKSPACE_LENGTH,
  unitNameFromRawPath,
  unitNameProblem,
  workspaceProblem,
} from '../../src/common/names';
import { thrown } from '../support/services';

/** A valid unit name of exactly `length` characters, in 9-character segments. */
function nameOfLength(length: number): string {
  let name = '';
  while (name.length < length) {
    name += name === '' ? 'a' : name.length % 10 === 9 ? '/' : 'a';
  }
  return name;
}

describe('unit names', () => {
  it.each([
    'team-a/network/prod',
    'app',
    'Team_A/App.v2/eu-west-1',
    'a/terraform.tfstate/b',
    'team/app.tfstate',
    'team/Terraform.tfstate',
    'team/terraform.tfstate.backup',
    '...',
    'a/.hidden/b',
  ])('accepts %s', (name) => {
    expect(unitNameProblem(name)).toBeUndefined();
    expect(assertUnitName(name)).toBe(name);
  });

  it('refuses an empty name, saying it is empty', () => {
    expect(unitNameProblem('')).toBe('unit name is empty');
  });

  it(`accepts ${MAX_UNIT_NAME_LENGTH} characters and refuses one more, saying it is too long`, () => {
    expect(MAX_UNIT_NAME_LENGTH).toBe(256);
    const longest = nameOfLength(256);
    expect(longest).toHaveLength(256);
    expect(unitNameProblem(longest)).toBeUndefined();
    expect(unitNameProblem(`${longest}a`)).toBe('unit name is longer than 256 characters');
  });

  it.each(['/team/app', 'team/app/', 'team//app', '/', '//'])(
    'refuses %s, saying a segment is empty',
    (name) => {
      expect(unitNameProblem(name)).toMatch(/empty segment/);
    },
  );

  it.each(['.', '..', 'team/./app', 'team/../app', '../app', 'team/..'])(
    'refuses %s, saying it has a dot segment',
    (name) => {
      expect(unitNameProblem(name)).toMatch(/"\." or "\.\." segment/);
    },
  );

  it.each([
    'team a/app',
    'team/app!',
    'team\\app',
    'team/app%2F',
    'équipe/app',
    'team/app\n',
    'team/app\u0000',
    'team:app',
    'team/app?x',
    'team/app#x',
    'team/app~',
  ])('refuses %j, saying which characters are allowed', (name) => {
    expect(unitNameProblem(name)).toMatch(/may only contain letters, digits/);
  });

  it.each(['terraform.tfstate', 'team/app/terraform.tfstate'])(
    'refuses %s, whose last segment is terraform.tfstate',
    (name) => {
      expect(unitNameProblem(name)).toMatch(/may not end in "terraform\.tfstate"/);
    },
  );

  it('names are case-sensitive (upper and lower case are both allowed and distinct)', () => {
    expect(assertUnitName('Team/App')).not.toBe(assertUnitName('team/app'));
  });

  it('assertUnitName throws invalid_name with the rule as its message', () => {
    const err = thrown(() => assertUnitName('team//app'));
    expect(err.code).toBe('invalid_name');
    expect(err.message).toMatch(/empty segment/);
  });
});

describe('workspace names', () => {
  it.each(['default', 'prod', 'eu-west-1', 'feature_x.2'])('accepts %s', (ws) => {
    expect(workspaceProblem(ws)).toBeUndefined();
    expect(assertWorkspace(ws)).toBe(ws);
  });

  it('uses "default" when no workspace is given', () => {
    expect(DEFAULT_WORKSPACE).toBe('default');
    expect(assertWorkspace(undefined)).toBe('default');
  });

  it('refuses an empty workspace, saying it is empty', () => {
    expect(workspaceProblem('')).toBe('workspace name is empty');
    expect(thrown(() => assertWorkspace('')).code).toBe('invalid_name');
  });

  it(`accepts ${MAX_WORKSPACE_LENGTH} characters and refuses one more`, () => {
    expect(MAX_WORKSPACE_LENGTH).toBe(128);
    expect(workspaceProblem('w'.repeat(128))).toBeUndefined();
    expect(workspaceProblem('w'.repeat(129))).toBe('workspace name is longer than 128 characters');
  });

  it.each(['.', '..'])('refuses %s', (ws) => {
    expect(workspaceProblem(ws)).toBe('workspace name may not be "." or ".."');
  });

  it.each(['a/b', 'a b', 'prod!', 'env:', 'dév'])(
    'refuses %j, saying which characters are allowed',
    (ws) => {
      expect(workspaceProblem(ws)).toMatch(/may only contain letters, digits/);
      expect(thrown(() => assertWorkspace(ws)).code).toBe('invalid_name');
    },
  );
});

describe('unitNameFromRawPath', () => {
  it('reads a plain path as the unit name', () => {
    expect(unitNameFromRawPath('team-a/network/prod')).toBe('team-a/network/prod');
  });

  it('decodes allowed percent-escapes', () => {
    expect(unitNameFromRawPath('team%2Dx/app')).toBe('team-x/app');
    expect(unitNameFromRawPath('%74eam/%61pp')).toBe('team/app');
  });

  it('ignores the query string', () => {
    expect(unitNameFromRawPath('team/app?ID=abc&workspace=prod')).toBe('team/app');
    expect(unitNameFromRawPath('team/app?lock')).toBe('team/app');
    expect(unitNameFromRawPath('team/app?next=a/../b')).toBe('team/app');
  });

  it.each(['team%2Fapp', 'team%2fapp', 'team/a%2Fb/c'])(
    'refuses an encoded "/" inside a segment (%s)',
    (raw) => {
      const err = thrown(() => unitNameFromRawPath(raw));
      expect(err.code).toBe('invalid_name');
      expect(err.message).toMatch(/encoded "\/"/);
    },
  );

  it.each(['team/%2E%2E/app', '%2e%2e/app', 'team/%2E', 'team/.%2E'])(
    'refuses a dot segment hidden by percent-encoding (%s)',
    (raw) => {
      const err = thrown(() => unitNameFromRawPath(raw));
      expect(err.code).toBe('invalid_name');
      expect(err.message).toMatch(/"\." or "\.\." segment/);
    },
  );

  it.each(['team/%', 'team/%zz', 'team/%E0%A4%A', 'team/%C3'])(
    'refuses malformed percent-encoding (%s)',
    (raw) => {
      const err = thrown(() => unitNameFromRawPath(raw));
      expect(err.code).toBe('invalid_name');
      expect(err.message).toMatch(/malformed percent-encoding/);
    },
  );

  it('decodes exactly once (an encoded "%" stays a refused character)', () => {
    const err = thrown(() => unitNameFromRawPath('team%252Fapp'));
    expect(err.message).toMatch(/may only contain letters, digits/);
  });

  it('refuses escapes that decode to characters outside the allowed set', () => {
    expect(thrown(() => unitNameFromRawPath('team%20a/app')).message).toMatch(
      /may only contain letters, digits/,
    );
    expect(thrown(() => unitNameFromRawPath('team%5Capp')).message).toMatch(
      /may only contain letters, digits/,
    );
  });

  it('applies every unit-name rule after decoding', () => {
    expect(thrown(() => unitNameFromRawPath('')).message).toBe('unit name is empty');
    expect(thrown(() => unitNameFromRawPath('?lock')).message).toBe('unit name is empty');
    expect(thrown(() => unitNameFromRawPath('team//app')).message).toMatch(/empty segment/);
    expect(thrown(() => unitNameFromRawPath('team/app/')).message).toMatch(/empty segment/);
    expect(thrown(() => unitNameFromRawPath('team/terraform%2Etfstate')).message).toMatch(
      /terraform\.tfstate/,
    );
  });
});
