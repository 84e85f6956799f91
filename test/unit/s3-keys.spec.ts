import fc from 'fast-check';
import { canonicalStateKey, objectKey, resolveKey } from '../../src/common/s3-keys';

const P = ['env:'];

describe('S3 object keys ↔ (unit, workspace)', () => {
  it.each([
    ['team/app/terraform.tfstate', 'team/app', 'default'],
    ['team/app.tfstate', 'team/app.tfstate', 'default'],
    ['env:/dev/team/app/terraform.tfstate', 'team/app', 'dev'],
    ['env:/dev/team/app.tfstate', 'team/app.tfstate', 'dev'],
    ['a/terraform.tfstate', 'a', 'default'],
  ])('%s is the state of unit %s, workspace %s', (key, unit, workspace) => {
    expect(resolveKey(key, P)).toEqual({ kind: 'state', ref: { unit, workspace } });
  });

  it('a key with .tflock appended is the lock object of that state', () => {
    expect(resolveKey('env:/dev/team/app/terraform.tfstate.tflock', P)).toEqual({
      kind: 'lock',
      ref: { unit: 'team/app', workspace: 'dev' },
    });
    expect(resolveKey('team/app.tfstate.tflock', P)).toEqual({
      kind: 'lock',
      ref: { unit: 'team/app.tfstate', workspace: 'default' },
    });
  });

  it.each([
    ['terraform.tfstate', /unit before it/],
    [
      'team/app.tfstate/terraform.tfstate',
      /key of unit team\/app.tfstate is team\/app.tfstate itself/,
    ],
    ['team/app', /state keys end in/],
    ['team/app.json', /state keys end in/],
    ['team//app/terraform.tfstate', /empty segment/],
    ['team/../app/terraform.tfstate', /"\." or "\.\." segment/],
    ['env:/default/team/terraform.tfstate', /default workspace has no env:\/ form/],
    ['env:/team/terraform.tfstate', /"\.tfstate"|state keys end in|unit/],
    ['env://team/terraform.tfstate', /names no workspace/],
    ['env:/d ev/team/terraform.tfstate', /workspace names may only/],
  ])('refuses %s, saying why', (key, reason) => {
    const r = resolveKey(key, P);
    expect(r.kind).toBe('invalid');
    expect(r.kind === 'invalid' && r.reason).toMatch(reason);
  });

  it('every unit has exactly one key per prefix, and that key resolves back to it', () => {
    const segment = fc
      .stringMatching(/^[A-Za-z0-9_-][A-Za-z0-9._-]{0,11}$/)
      .filter((s) => s !== '..' && s !== 'terraform.tfstate');
    fc.assert(
      fc.property(
        fc.array(segment, { minLength: 1, maxLength: 4 }),
        fc.boolean(),
        fc.constantFrom('default', 'dev', 'prod-eu'),
        (segments, tfstateSuffix, workspace) => {
          const unit = segments.join('/') + (tfstateSuffix ? '.tfstate' : '');
          const key = objectKey({ unit, workspace }, 'env:');
          expect(resolveKey(key, P)).toEqual({ kind: 'state', ref: { unit, workspace } });
          // The other spelling of the same unit is refused, never a second door to it.
          const other = canonicalStateKey(unit) === unit ? `${unit}/terraform.tfstate` : unit;
          const r = resolveKey(other, P);
          if (r.kind === 'state') expect(r.ref.unit).not.toBe(unit);
        },
      ),
      { numRuns: 2000 },
    );
  });
});
