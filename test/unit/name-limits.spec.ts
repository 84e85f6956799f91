import { plainToInstance } from 'class-transformer';
import { getMetadataStorage, validate } from 'class-validator';
import '../../src/audit/audit.controller';
import '../../src/auth/dto/auth.dto';
import { DeclareEdgeDto, GraphQuery } from '../../src/graph/dto/graph.dto';
import '../../src/state/locks/locks.controller';
import { AssignDto, TestDto } from '../../src/rbac/dto/rbac.dto';
import { validateRules } from '../../src/rbac/rbac.service';
import {
  assertUnitName,
  assertWorkspace,
  MAX_RBAC_NAME_LENGTH,
  MAX_UNIT_NAME_LENGTH,
  MAX_WORKSPACE_LENGTH,
} from '../../src/common/names';
import { ListUnitsQuery } from '../../src/state/dto/state.dto';

/** A valid unit name of exactly `length` characters. */
const unitOfLength = (length: number): string =>
  Array.from({ length }, (_, i) => (i % 10 === 9 && i < length - 1 ? '/' : 'a')).join('');

async function problems(cls: new () => object, plain: object): Promise<string[]> {
  const errors = await validate(plainToInstance(cls, plain), {
    whitelist: true,
    forbidNonWhitelisted: true,
  });
  const flat = (es: typeof errors): string[] =>
    es.flatMap((e) => [...Object.values(e.constraints ?? {}), ...flat(e.children ?? [])]);
  return flat(errors);
}

describe('name limits: one source of truth (src/common/names.ts) for every DTO and validator', () => {
  const longestUnit = unitOfLength(MAX_UNIT_NAME_LENGTH);
  const longestWorkspace = 'w'.repeat(MAX_WORKSPACE_LENGTH);

  it('the longest names the services accept are valid names', () => {
    expect(assertUnitName(longestUnit)).toBe(longestUnit);
    expect(assertWorkspace(longestWorkspace)).toBe(longestWorkspace);
  });

  it('DeclareEdgeDto accepts the longest unit and workspace names, and refuses one character more', async () => {
    const edge = (unit: string, workspace: string) => ({
      producer: { unit, workspace },
      consumer: { unit: 'team/app' },
    });
    expect(await problems(DeclareEdgeDto, edge(longestUnit, longestWorkspace))).toEqual([]);
    expect(await problems(DeclareEdgeDto, edge(`${longestUnit}a`, 'default'))).toEqual([
      `unit is longer than ${MAX_UNIT_NAME_LENGTH} characters (the longest unit name)`,
    ]);
    expect(await problems(DeclareEdgeDto, edge('team/net', `${longestWorkspace}w`))).toEqual([
      `workspace is longer than ${MAX_WORKSPACE_LENGTH} characters (the longest workspace name)`,
    ]);
  });

  it('the RBAC test resource, unit-name prefixes and role names have the same limits', async () => {
    const resource = (unit: string, workspace: string) => ({
      action: 'unit.read',
      resource: { unit, workspace },
    });
    expect(await problems(TestDto, resource(longestUnit, longestWorkspace))).toEqual([]);
    expect(
      await problems(TestDto, resource(`${longestUnit}a`, `${longestWorkspace}w`)),
    ).toHaveLength(2);
    for (const cls of [GraphQuery, ListUnitsQuery]) {
      expect(await problems(cls, { prefix: longestUnit })).toEqual([]);
      expect(await problems(cls, { prefix: `${longestUnit}a` })).toHaveLength(1);
    }
    const role = 'r'.repeat(MAX_RBAC_NAME_LENGTH);
    expect(await problems(AssignDto, { role, subject: 'svc:x' })).toEqual([]);
    expect(await problems(AssignDto, { role: `${role}r`, subject: 'svc:x' })).toHaveLength(1);
  });

  it('RBAC workspace patterns may be as long as a workspace name', () => {
    const rule = (w: string) => ({
      effect: 'allow',
      actions: ['unit.read'],
      resources: ['**'],
      workspaces: [w],
    });
    expect(validateRules([rule(longestWorkspace)])[0].workspaces).toEqual([longestWorkspace]);
    expect(() => validateRules([rule(`${longestWorkspace}w`)])).toThrow(/not valid/);
  });

  it('every DTO field holding a unit name, a workspace or a role name takes its limit from names.ts', () => {
    const expected: Record<string, number> = {
      unit: MAX_UNIT_NAME_LENGTH,
      prefix: MAX_UNIT_NAME_LENGTH,
      resource: MAX_UNIT_NAME_LENGTH,
      workspace: MAX_WORKSPACE_LENGTH,
      role: MAX_RBAC_NAME_LENGTH,
    };
    const storage = getMetadataStorage() as unknown as {
      validationMetadatas: Map<
        new () => object,
        { propertyName: string; name?: string; constraints?: unknown[] }[]
      >;
    };
    const seen: string[] = [];
    for (const [target, metas] of storage.validationMetadatas) {
      for (const m of metas) {
        if (m.name !== 'maxLength' || !(m.propertyName in expected)) continue;
        seen.push(`${target.name}.${m.propertyName}`);
        expect({ field: `${target.name}.${m.propertyName}`, max: m.constraints?.[0] }).toEqual({
          field: `${target.name}.${m.propertyName}`,
          max: expected[m.propertyName],
        });
      }
    }
    expect(seen).toEqual(
      expect.arrayContaining([
        'NodeRefDto.unit',
        'NodeRefDto.workspace',
        'TestResourceDto.unit',
        'TestResourceDto.workspace',
        'GraphQuery.prefix',
        'StaleQuery.prefix',
        'ListUnitsQuery.prefix',
        'AuditQuery.resource',
        'AssignDto.role',
      ]),
    );
  });
});
