import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { digestKeys, outputDigests } from '../../src/state/output-digests';
import { resolveRemoteState, SelfAddresses } from '../../src/graph/remote-config';
import { StateInspector } from '../../src/state/state-inspector';
import { FIXTURES } from '../support/paths';

const SELF: SelfAddresses = {
  bases: ['http://localhost:8080', 'http://127.0.0.1:8080'],
  buckets: ['tfstate'],
  workspacePrefixes: ['env:'],
};

describe('output digests', () => {
  it('keep types apart and ignore key order', () => {
    const k = digestKeys(Buffer.alloc(32, 1));
    const d = (v: unknown) => outputDigests(k, { v }).v;
    expect(d({ b: 1, a: [true, null, 'x'] })).toBe(d({ a: [true, null, 'x'], b: 1 }));
    expect(d('1')).not.toBe(d(1));
    expect(d([])).not.toBe(d({}));
    expect(d(null)).not.toBe(d('null'));
  });

  it('equal values give equal digests; different values or keys give different ones', () => {
    const k1 = digestKeys(Buffer.alloc(32, 1));
    const k2 = digestKeys(Buffer.alloc(32, 2));
    const a = outputDigests(k1, { vpc: { id: 'v', cidr: '10.0.0.0/16' } });
    const b = outputDigests(k1, { vpc: { cidr: '10.0.0.0/16', id: 'v' } });
    expect(a).toEqual(b);
    expect(outputDigests(k1, { vpc: 'other' }).vpc).not.toBe(a.vpc);
    expect(outputDigests(k2, { vpc: { id: 'v', cidr: '10.0.0.0/16' } }).vpc).not.toBe(a.vpc);
    expect(a.vpc).toMatch(/^v2:[0-9a-f]{64}$/);
  });
});

describe('recognising this server in terraform_remote_state configs', () => {
  const sources = (() => {
    const inspector = new StateInspector();
    inspector.write(readFileSync(join(FIXTURES, 'consumer.tfstate')));
    const r = inspector.end();
    if (r.kind !== 'terraform') throw new Error('fixture');
    return Object.fromEntries(r.remoteStates.map((s) => [s.name, s]));
  })();

  it('maps the s3 and http data sources of the consumer fixture to units here', () => {
    expect(resolveRemoteState(sources.network, SELF)).toEqual({
      unit: 'platform/network',
      workspace: 'default',
    });
    expect(resolveRemoteState(sources.dns, SELF)).toEqual({
      unit: 'platform/dns',
      workspace: 'default',
    });
  });

  it('ignores other servers, other buckets and unmappable keys', () => {
    const other: SelfAddresses = { ...SELF, bases: ['https://statehouse.example.com'] };
    expect(resolveRemoteState(sources.network, other)).toBeUndefined();
    expect(resolveRemoteState(sources.dns, other)).toBeUndefined();
    expect(
      resolveRemoteState(
        { ...sources.network, config: { ...sources.network.config, bucket: 'elsewhere' } },
        SELF,
      ),
    ).toBeUndefined();
    expect(
      resolveRemoteState(
        { ...sources.network, config: { ...sources.network.config, key: 'terraform.tfstate' } },
        SELF,
      ),
    ).toBeUndefined();
    expect(
      resolveRemoteState(
        { ...sources.dns, config: { address: 'http://127.0.0.1:8080/v1/backend/a/../b' } },
        SELF,
      ),
    ).toBeUndefined();
    expect(
      resolveRemoteState({ ...sources.dns, backend: 'local', config: { path: 'x' } }, SELF),
    ).toBeUndefined();
  });

  it('maps a remote backend (the TFE door) at this host: workspaces.name, or prefix + workspace', () => {
    const self: SelfAddresses = { ...SELF, bases: ['https://statehouse.example.com:8443'] };
    const source = {
      name: 'net',
      backend: 'remote',
      workspace: null,
      outputs: {},
      config: {
        hostname: 'statehouse.example.com:8443',
        organization: 'acme',
        workspaces: { name: 'network' },
      },
    };
    expect(resolveRemoteState(source, self)).toEqual({
      unit: 'acme/network',
      workspace: 'default',
    });
    expect(
      resolveRemoteState(
        {
          ...source,
          workspace: 'prod',
          config: { ...source.config, workspaces: { prefix: 'app-' } },
        },
        self,
      ),
    ).toEqual({ unit: 'acme/app-prod', workspace: 'default' });
    // Another host, Terraform's default host (no hostname), names the TFE door cannot serve.
    for (const config of [
      { ...source.config, hostname: 'app.terraform.io' },
      { organization: 'acme', workspaces: { name: 'network' } },
      { ...source.config, workspaces: { name: 'a/b' } },
      { ...source.config, organization: '../x' },
      { ...source.config, workspaces: {} },
    ]) {
      expect(resolveRemoteState({ ...source, config }, self)).toBeUndefined();
    }
  });

  it('honours the workspace of the data source and the workspace key prefix', () => {
    expect(resolveRemoteState({ ...sources.network, workspace: 'dev' }, SELF)).toEqual({
      unit: 'platform/network',
      workspace: 'dev',
    });
    expect(
      resolveRemoteState(
        {
          ...sources.dns,
          config: { address: 'http://localhost:8080/v1/backend/platform/dns?workspace=prod' },
        },
        SELF,
      ),
    ).toEqual({ unit: 'platform/dns', workspace: 'prod' });
  });
});
