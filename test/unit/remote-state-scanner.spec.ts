/**
 * What the state inspector keeps of `terraform_remote_state` data sources (remote-state
 * scanner): the addressing config keys and a v2 digest of each output read, streamed — equal to
 * the digest of the parsed value whatever its spelling — under caps that refuse with a 400.
 */
import fc from 'fast-check';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  digestKeys,
  digestValue,
  outputDigests,
  outputValues,
} from '../../src/state/output-digests';
import {
  MAX_REMOTE_STATE_BYTES,
  MAX_REMOTE_STATES,
  MAX_REMOTE_VALUE_BYTES,
  RemoteStateScanner,
} from '../../src/state/remote-state-scanner';
import { InspectedState, InvalidStateError, StateInspector } from '../../src/state/state-inspector';
import { FIXTURES } from '../support/paths';

const KEY = Buffer.alloc(32, 7);
const KEYS = digestKeys(KEY);

function inspect(body: Buffer | string, chunk = 0): InspectedState {
  const bytes = typeof body === 'string' ? Buffer.from(body) : body;
  const inspector = new StateInspector({ digestKey: KEY });
  if (chunk <= 0) inspector.write(bytes);
  else for (let i = 0; i < bytes.length; i += chunk) inspector.write(bytes.subarray(i, i + chunk));
  return inspector.end();
}

function sources(body: Buffer | string, chunk = 0) {
  const r = inspect(body, chunk);
  if (r.kind !== 'terraform') throw new Error('not terraform');
  return r.remoteStates;
}

/** A state whose resources are given as raw JSON texts. */
const stateWith = (resources: string[]): string =>
  `{"version":4,"serial":1,"lineage":"l","outputs":{},"resources":[${resources.join(',')}]}`;

const remote = (opts: {
  name?: string;
  backend?: string;
  instances?: string[];
  config?: string;
  outputs?: string;
  typeLast?: boolean;
}): string => {
  const inst = opts.instances ?? [
    `{"schema_version":0,"attributes":{"backend":"${opts.backend ?? 'http'}","config":{"value":${opts.config ?? '{"address":"http://h/v1/backend/a","password":"pw"}'},"type":["object",{}]},"defaults":null,"outputs":{"value":${opts.outputs ?? '{"a":1}'},"type":["object",{}]},"workspace":null}}`,
  ];
  const head = `"mode":"data","type":"terraform_remote_state","name":${JSON.stringify(opts.name ?? 'n')}`;
  const body = `"provider":"p","instances":[${inst.join(',')}]`;
  return opts.typeLast ? `{${body},${head}}` : `{${head},${body}}`;
};

/** JSON text of `v` spelled unusually: escapes, whitespace, number forms, shuffled keys. */
function spell(v: unknown, rnd: () => number): string {
  const ws = () => [' ', '', '\n  ', '\t'][Math.floor(rnd() * 4)];
  const str = (s: string) => {
    let out = '"';
    for (const ch of s) {
      const c = ch.codePointAt(0) as number;
      const surrogate = c >= 0xd800 && c <= 0xdfff; // lone: only an escape can write it
      if (ch === '"' || ch === '\\' || c < 0x20 || surrogate || rnd() < 0.2) {
        for (let k = 0; k < ch.length; k++) {
          out += `\\u${ch.charCodeAt(k).toString(16).padStart(4, '0')}`;
        }
      } else if (ch === '/' && rnd() < 0.5) out += '\\/';
      else out += ch;
    }
    return `${out}"`;
  };
  if (v === null) return 'null';
  if (typeof v === 'boolean') return String(v);
  if (typeof v === 'number') {
    const t = JSON.stringify(v);
    if (Number.isInteger(v) && Math.abs(v) < 1e6 && rnd() < 0.5) return `${t}.0e0`;
    return t;
  }
  if (typeof v === 'string') return str(v);
  if (Array.isArray(v)) return `[${ws()}${v.map((x) => spell(x, rnd)).join(`,${ws()}`)}${ws()}]`;
  const keys = Object.keys(v as object).sort(() => rnd() - 0.5);
  return `{${ws()}${keys
    .map((k) => `${str(k)}${ws()}:${ws()}${spell((v as Record<string, unknown>)[k], rnd)}`)
    .join(`,${ws()}`)}${ws()}}`;
}

/** Strings of any code units, lone surrogates included (fc's own units never make those). */
const text = fc.oneof(
  fc.string({ unit: 'binary', maxLength: 8 }),
  fc
    .array(fc.integer({ min: 0, max: 0xffff }), { maxLength: 8 })
    .map((a) => String.fromCharCode(...a)),
);
const json: fc.Arbitrary<unknown> = fc.letrec((tie) => ({
  value: fc.oneof(
    { depthSize: 'small' },
    fc.constant(null),
    fc.boolean(),
    fc.integer(),
    fc.double({ noNaN: true, noDefaultInfinity: true }),
    text,
    fc.array(tie('value'), { maxLength: 4 }),
    fc.dictionary(text, tie('value'), { maxKeys: 4 }),
  ),
})).value;

describe('remote-state data sources: what is kept', () => {
  it('keeps the addressing config keys only: no credential, no other value, no output value', () => {
    const [s] = sources(
      stateWith([
        remote({
          config:
            '{"bucket":"tfstate","key":"a/terraform.tfstate","endpoints":{"s3":"http://h/s3","dynamodb":"x"},"access_key":"AKIA-SECRET","secret_key":"SECRET-KEY","region":"r","workspace_key_prefix":"env:"}',
          outputs: '{"db":"SECRET-OUTPUT-VALUE"}',
        }),
      ]),
    );
    expect(s.config).toEqual({
      bucket: 'tfstate',
      key: 'a/terraform.tfstate',
      endpoints: { s3: 'http://h/s3' },
      workspace_key_prefix: 'env:',
    });
    expect(Object.keys(s.outputs)).toEqual(['db']);
    expect(JSON.stringify(s)).not.toMatch(/SECRET/);
  });

  it('keeps a remote backend’s hostname, organization and workspaces name or prefix — not its token', () => {
    const [s] = sources(
      stateWith([
        remote({
          backend: 'remote',
          config:
            '{"hostname":"statehouse.example.com","organization":"acme","token":"SECRET-TOKEN","workspaces":{"name":"network","prefix":null,"other":"x"}}',
        }),
      ]),
    );
    expect(s.backend).toBe('remote');
    expect(s.config).toEqual({
      hostname: 'statehouse.example.com',
      organization: 'acme',
      workspaces: { name: 'network' },
    });
    expect(JSON.stringify(s)).not.toMatch(/SECRET/);
  });

  it('streams each output into a digest equal to the parsed value’s, whatever the spelling and chunking', () => {
    fc.assert(
      fc.property(
        fc.dictionary(text, json),
        fc.integer({ min: 1, max: 97 }),
        fc.integer(),
        (outputs, chunk, seed) => {
          let x = seed >>> 0;
          const rnd = () => (x = (Math.imul(x, 1103515245) + 12345) >>> 0) / 2 ** 32;
          // The scanner itself (the inspector in front of it may refuse lone surrogates).
          const element = Buffer.from(remote({ outputs: spell(outputs, rnd) }));
          const scanner = new RemoteStateScanner(KEYS);
          scanner.beginElement();
          for (let i = 0; i < element.length; i += chunk) {
            scanner.feed(element, i, Math.min(element.length, i + chunk));
          }
          scanner.endElement();
          const [s] = scanner.sources;
          const parsed = JSON.parse(JSON.stringify(outputs)) as Record<string, unknown>;
          const expected: Record<string, string> = {};
          for (const k of Object.keys(parsed)) expected[k] = digestValue(KEYS, parsed[k]);
          expect(s.outputs).toEqual(expected);
        },
      ),
      { numRuns: 300 },
    );
  });

  it('the inspector streams a spelled-out output to the same digest as the parsed value', () => {
    const value = { b: [1, 'é/😀', null, true], a: { x: -2.5e3, y: '\n"' } };
    let x = 42;
    const rnd = () => (x = (Math.imul(x, 1103515245) + 12345) >>> 0) / 2 ** 32;
    const body = stateWith([remote({ outputs: `{"o":${spell(value, rnd)}}` })]);
    for (const chunk of [0, 1, 3, 64]) {
      expect(sources(body, chunk)[0].outputs).toEqual({ o: digestValue(KEYS, value) });
    }
  });

  it('real Terraform files: what the consumer fixture read digests as the producer fixtures’ outputs', () => {
    const fixture = (name: string) => readFileSync(join(FIXTURES, name));
    const produced = (name: string) => {
      const r = inspect(fixture(name));
      if (r.kind !== 'terraform') throw new Error(name);
      return outputDigests(KEYS, outputValues(r.outputs));
    };
    const read = Object.fromEntries(
      sources(fixture('consumer.tfstate'), 7).map((x) => [x.name, x.outputs]),
    );
    expect(read.network).toEqual(produced('producer-network.tfstate'));
    expect(read.dns).toEqual(produced('producer-dns.tfstate'));
  });

  it('different values give different digests; key order and number spelling do not matter', () => {
    const d = (text: string) =>
      sources(stateWith([remote({ outputs: `{"o":${text}}` })]))[0].outputs.o;
    expect(d('{"a":1,"b":[1,"x"]}')).toBe(d('{"b":[1.0,"\\u0078"],"a":1e0}'));
    expect(d('{"a":1}')).not.toBe(d('{"a":2}'));
    expect(d('{"a":1}')).not.toBe(d('{"a":"1"}'));
    expect(d('[1,2]')).not.toBe(d('[2,1]'));
    expect(d('{"a":{"b":1}}')).not.toBe(d('{"a":{"c":1}}'));
    expect(d('{"a":1,"b":2}')).not.toBe(d('{"a":2,"b":1}'));
    expect(d('"a"')).toMatch(/^v2:[0-9a-f]{64}$/);
  });

  it('names instances by their index key, as Terraform addresses them', () => {
    const inst = (key: string) =>
      `{"index_key":${key},"attributes":{"backend":"http","config":{"value":{"address":"x"}},"outputs":{"value":{}}}}`;
    expect(
      sources(
        stateWith([remote({ name: 'n', instances: [inst('"a\\u0062"'), inst('1.0'), inst('2')] })]),
      ).map((s) => s.name),
    ).toEqual(['n["ab"]', 'n[1]', 'n[2]']);
  });

  it('finds a data source whose type comes after its instances, and ignores other resources', () => {
    const managed = `{"mode":"managed","type":"terraform_remote_state","name":"m","instances":[{"attributes":{"outputs":{"value":{"a":1}}}}]}`;
    const other = `{"instances":[{"attributes":{"backend":"http","outputs":{"value":{"a":1}}}}],"mode":"data","type":"http","name":"h"}`;
    const got = sources(stateWith([managed, other, remote({ name: 'late', typeLast: true })]));
    expect(got.map((s) => s.name)).toEqual(['late']);
    expect(got[0].config).toEqual({ address: 'http://h/v1/backend/a' });
  });

  it('looks at a resource of any size (a 40 MiB output no longer hides the data source)', () => {
    const big = `{"blob":"${'x'.repeat(40 * 1024 * 1024)}"}`;
    const got = sources(stateWith([remote({ outputs: big })]), 65536);
    expect(got).toHaveLength(1);
    expect(Object.keys(got[0].outputs)).toEqual(['blob']);
  });
});

describe('remote-state data sources: caps', () => {
  const refusal = (body: string): InvalidStateError => {
    try {
      inspect(body, 4096);
    } catch (e) {
      expect(e).toBeInstanceOf(InvalidStateError);
      expect((e as InvalidStateError).limit).toBe(true);
      return e as InvalidStateError;
    }
    throw new Error('accepted');
  };

  it(`accepts ${MAX_REMOTE_STATES} data source instances and refuses one more, naming the limit`, () => {
    const one = (i: number) => remote({ name: `r${i}` });
    const ok = Array.from({ length: MAX_REMOTE_STATES }, (_, i) => one(i));
    expect(sources(stateWith(ok))).toHaveLength(MAX_REMOTE_STATES);
    expect(refusal(stateWith([...ok, one(MAX_REMOTE_STATES)])).message).toBe(
      `state has more than ${MAX_REMOTE_STATES} terraform_remote_state data source instances (the limit per state)`,
    );
  });

  it('counts instances, not resources: one for_each data source with too many instances is refused', () => {
    const inst = (i: number) =>
      `{"index_key":"k${i}","attributes":{"backend":"http","config":{"value":{}},"outputs":{"value":{}}}}`;
    const body = stateWith([
      remote({ instances: Array.from({ length: MAX_REMOTE_STATES + 1 }, (_, i) => inst(i)) }),
    ]);
    expect(refusal(body).message).toContain(`more than ${MAX_REMOTE_STATES}`);
  });

  it('refuses more than the byte budget of output names, naming it', () => {
    const names = Array.from({ length: 1100 }, (_, i) => `"${String(i).padStart(16000, 'n')}":1`);
    const body = stateWith([remote({ outputs: `{${names.join(',')}}` })]);
    expect(refusal(body).message).toContain(`more than ${MAX_REMOTE_STATE_BYTES} bytes`);
  });

  it('refuses an output name or data source name over the value cap', () => {
    const long = 'n'.repeat(MAX_REMOTE_VALUE_BYTES + 1);
    expect(refusal(stateWith([remote({ outputs: `{"${long}":1}` })])).message).toContain(
      `longer than ${MAX_REMOTE_VALUE_BYTES} bytes`,
    );
    expect(refusal(stateWith([remote({ name: long })])).message).toContain(
      `longer than ${MAX_REMOTE_VALUE_BYTES} bytes`,
    );
  });

  it('a limit broken before the type is known refuses a remote state, and nothing else', () => {
    const long = 'n'.repeat(MAX_REMOTE_VALUE_BYTES + 1);
    expect(
      refusal(stateWith([remote({ outputs: `{"${long}":1}`, typeLast: true })])).message,
    ).toContain('longer than');
    const managed = `{"instances":[{"attributes":{"outputs":{"value":{"${long}":1}}}}],"mode":"managed","type":"x","name":"m"}`;
    expect(sources(stateWith([managed]))).toEqual([]);
  });

  it('an address longer than any address here keeps the source, with no config (it is not ours)', () => {
    const [s] = sources(
      stateWith([
        remote({ config: `{"address":"http://h/${'a'.repeat(MAX_REMOTE_VALUE_BYTES)}"}` }),
      ]),
    );
    expect(s.config).toEqual({});
  });
});
