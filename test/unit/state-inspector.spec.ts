/**
 * StateInspector: streaming validation of state bodies.
 *
 * Throughput, measured 2026-11-30 by the measurement now in scripts/bench-inspector.mjs
 * (`npm run bench:inspector`) on this machine (2-vCPU AMD EPYC VM, Node 20.20, shared with other
 * jobs): a 57 MiB pretty-printed state in 64 KiB chunks runs at 360-460 MiB/s when measured alone
 * (best 462 MiB/s), and about 230 MiB/s when all unit suites shared the two CPUs. JSON.parse of
 * the same body: 45-110 MiB/s. A bare byte-at-a-time JS loop over a Buffer manages only
 * ~300-600 MiB/s here, which is why the inspector scans strings and indentation four bytes at a
 * time.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import fc from 'fast-check';
import { digestKeys, outputDigests } from '../../src/state/output-digests';
import {
  InspectedState,
  RemoteStateSource,
  InvalidStateError,
  MAX_NESTING_DEPTH,
  StateInspector,
  StateOutput,
} from '../../src/state/state-inspector';
import { FIXTURES } from '../support/paths';

const fixtureNames = fs
  .readdirSync(FIXTURES)
  .filter((name) => name.endsWith('.tfstate'))
  .sort();
const readFixture = (name: string): Buffer => fs.readFileSync(path.join(FIXTURES, name));
const terraformFixtures = fixtureNames.filter(
  (name) => (JSON.parse(readFixture(name).toString('utf8')) as { version?: unknown }).version === 4,
);
const ENCRYPTED_FIXTURE = 'opentofu-encrypted.HANDMADE.tfstate';

type Options = { maxOutputsBytes?: number };

/** Feeds `body` in chunks whose sizes cycle through `sizes` (whole body when omitted). */
function inspect(body: Buffer | string, sizes?: number[], options?: Options): InspectedState {
  const bytes = typeof body === 'string' ? Buffer.from(body, 'utf8') : body;
  const inspector = new StateInspector(options);
  if (sizes === undefined || sizes.length === 0) {
    inspector.write(bytes);
  } else {
    for (let offset = 0, k = 0; offset < bytes.length; k++) {
      const size = sizes[k % sizes.length];
      inspector.write(bytes.subarray(offset, offset + size));
      offset += size;
    }
  }
  return inspector.end();
}

const bytewise = (body: Buffer | string, options?: Options): InspectedState =>
  inspect(body, [1], options);

/** The InvalidStateError thrown for `body`, fed whole and one byte at a time (same message). */
function refusal(body: Buffer | string, options?: Options): InvalidStateError {
  const errors = [() => inspect(body, undefined, options), () => bytewise(body, options)].map(
    (run) => {
      try {
        run();
      } catch (err) {
        return err;
      }
      throw new Error('the body was accepted');
    },
  );
  for (const err of errors) {
    expect(err).toBeInstanceOf(InvalidStateError);
    expect((err as Error).name).toBe('InvalidStateError');
  }
  expect((errors[1] as Error).message).toBe((errors[0] as Error).message);
  return errors[0] as InvalidStateError;
}

type Outcome = { state: InspectedState } | { error: string };

/** Result or refusal message; any other exception escapes and fails the test. */
function outcome(body: Buffer | string, sizes?: number[]): Outcome {
  try {
    return { state: inspect(body, sizes) };
  } catch (err) {
    if (err instanceof InvalidStateError) return { error: err.message };
    throw err;
  }
}

/** A valid v4 state with `members` (raw JSON text, no leading comma) added at the end. */
const tf = (members = ''): string =>
  `{"version":4,"terraform_version":"1.11.4","serial":3,"lineage":"lin-1"${members ? ',' + members : ''}}`;

/** The remote-state data sources of a parsed state, as the inspector must report them. */
function expectedRemoteStates(doc: Record<string, unknown>): RemoteStateSource[] {
  const out: RemoteStateSource[] = [];
  const obj = (v: unknown): v is Record<string, unknown> =>
    typeof v === 'object' && v !== null && !Array.isArray(v);
  for (const r of Array.isArray(doc.resources) ? (doc.resources as unknown[]) : []) {
    if (!obj(r) || r.mode !== 'data' || r.type !== 'terraform_remote_state') continue;
    for (const inst of Array.isArray(r.instances) ? (r.instances as unknown[]) : []) {
      if (!obj(inst) || !obj(inst.attributes)) continue;
      const a = inst.attributes;
      const name = typeof r.name === 'string' ? r.name : '?';
      const config: Record<string, unknown> = {};
      const given = obj(a.config) && obj(a.config.value) ? a.config.value : {};
      for (const k of ['address', 'bucket', 'key', 'endpoint', 'workspace_key_prefix']) {
        if (typeof given[k] === 'string') config[k] = given[k];
      }
      if (obj(given.endpoints) && typeof given.endpoints.s3 === 'string') {
        config.endpoints = { s3: given.endpoints.s3 };
      }
      const values = obj(a.outputs) && obj(a.outputs.value) ? a.outputs.value : {};
      out.push({
        name: inst.index_key === undefined ? name : `${name}[${JSON.stringify(inst.index_key)}]`,
        backend: typeof a.backend === 'string' ? a.backend : '',
        config,
        workspace: typeof a.workspace === 'string' ? a.workspace : null,
        outputs: outputDigests(digestKeys(Buffer.alloc(32)), values),
      });
    }
  }
  return out;
}

/** What the inspector must report for a state JSON.parse reads as `doc`. */
function expectedTerraform(doc: Record<string, unknown>): InspectedState {
  const outputs: Record<string, StateOutput> = {};
  for (const [name, raw] of Object.entries((doc.outputs ?? {}) as Record<string, unknown>)) {
    const member = raw as Record<string, unknown>;
    const output: StateOutput = { value: member.value };
    if ('type' in member) output.type = member.type;
    if ('sensitive' in member) output.sensitive = member.sensitive as boolean;
    Object.defineProperty(outputs, name, { value: output, enumerable: true });
  }
  return {
    kind: 'terraform',
    version: 4,
    terraformVersion: (doc.terraform_version as string | undefined) ?? null,
    serial: doc.serial as number,
    lineage: doc.lineage as string,
    outputs,
    remoteStates: expectedRemoteStates(doc),
  };
}

/** True when a string (member names too, unless `values only`) anywhere in `value` passes `test`. */
function holds(value: unknown, test: (s: string) => boolean, valuesOnly = false): boolean {
  const pending = [value];
  while (pending.length > 0) {
    const v = pending.pop();
    if (typeof v === 'string') {
      if (test(v)) return true;
    } else if (typeof v === 'object' && v !== null) {
      for (const [k, child] of Object.entries(v)) {
        if (!valuesOnly) pending.push(k);
        pending.push(child);
      }
    }
  }
  return false;
}
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;
const hasLoneSurrogate = (s: string): boolean => LONE_SURROGATE.test(s);
const hasNul = (s: string): boolean => s.includes('\u0000');

/**
 * True when Terraform could not have written the state JSON.parse reads as `doc`, so the
 * inspector must refuse it: an unpaired surrogate anywhere, or a NUL in lineage,
 * terraform_version, an output's name or a type name in its type (not its attribute names).
 */
function unwritable(doc: Record<string, unknown>): boolean {
  if (holds(doc, hasLoneSurrogate)) return true;
  if (holds(doc.lineage, hasNul) || holds(doc.terraform_version, hasNul)) return true;
  const outputs = (doc.outputs ?? {}) as Record<string, Record<string, unknown>>;
  return Object.entries(outputs).some(([name, o]) => hasNul(name) || holds(o.type, hasNul, true));
}
const UNWRITABLE = /^state (holds an unpaired UTF-16 surrogate|has a NUL character in)/;

const chunkSizes = fc.array(
  fc.oneof(fc.integer({ min: 1, max: 7 }), fc.integer({ min: 64, max: 700 })),
  { minLength: 1, maxLength: 8 },
);

describe('StateInspector', () => {
  describe('real Terraform 1.11 state files', () => {
    it('finds every fixture file', () => {
      expect(terraformFixtures.length).toBeGreaterThanOrEqual(5);
      expect(fixtureNames).toContain(ENCRYPTED_FIXTURE);
    });

    it.each(terraformFixtures)(
      '%s gives the serial, lineage, version and outputs JSON.parse reads',
      (name) => {
        const body = readFixture(name);
        const doc = JSON.parse(body.toString('utf8')) as Record<string, unknown>;
        const result = inspect(body);
        expect(result).toEqual({
          kind: 'terraform',
          version: 4,
          terraformVersion: doc.terraform_version,
          serial: doc.serial,
          lineage: doc.lineage,
          outputs: doc.outputs,
          remoteStates: expectedRemoteStates(doc),
        });
      },
    );

    it('keeps sensitive: true on a sensitive output', () => {
      const result = inspect(readFixture('producer-network.tfstate'));
      expect(result.kind === 'terraform' && result.outputs.db_password).toEqual({
        value: 'not-a-real-secret',
        type: 'string',
        sensitive: true,
      });
    });

    it('reads the hand-made OpenTofu envelope as encrypted', () => {
      expect(inspect(readFixture(ENCRYPTED_FIXTURE))).toEqual({
        kind: 'encrypted',
        encryptionVersion: 'v0',
      });
    });

    it.each(fixtureNames)('%s fed one byte at a time gives the same answer', (name) => {
      const body = readFixture(name);
      expect(bytewise(body)).toEqual(inspect(body));
    });

    it('every fixture in random chunkings gives the same answer', () => {
      const whole = new Map(fixtureNames.map((name) => [name, inspect(readFixture(name))]));
      fc.assert(
        fc.property(fc.constantFrom(...fixtureNames), chunkSizes, (name, sizes) => {
          expect(inspect(readFixture(name), sizes)).toEqual(whole.get(name));
        }),
        { numRuns: 300 },
      );
    });

    it('keeps captured outputs intact when the caller reuses its chunk buffer', () => {
      const body = readFixture('simple.tfstate');
      const scratch = Buffer.alloc(13);
      const inspector = new StateInspector();
      for (let offset = 0; offset < body.length; offset += scratch.length) {
        const n = body.copy(scratch, 0, offset, offset + scratch.length);
        inspector.write(scratch.subarray(0, n));
        scratch.fill(0x7a); // the caller scribbles over its buffer after each write
      }
      expect(inspector.end()).toEqual(inspect(body));
    });
  });

  describe('the body must be exactly one valid JSON object', () => {
    it('accepts every JSON construct deep inside resources, in any chunking', () => {
      const body = tf(
        '"resources":[{"a":[1,-0.5e+10,0,0.25,1E-3,-0,true,false,null,"\\"\\\\\\/\\b\\f\\n\\r\\t\\u00e9\\uD83D\\ude00",{},[]],' +
          '"b":{"c":{"d":[[[]]]}},"é😀":"\u007f"}],"check_results":null',
      );
      const expected = expectedTerraform(JSON.parse(body) as Record<string, unknown>);
      expect(inspect(body)).toEqual(expected);
      expect(bytewise(body)).toEqual(expected);
    });

    it('accepts whitespace around the object and between tokens', () => {
      const body = ` \t\r\n{ "version" : 4 ,\n\t"serial":\r\n3, "lineage" : "l" , "resources" : [ 1 , { } ] } \n\r\t `;
      expect(inspect(body)).toMatchObject({ kind: 'terraform', serial: 3, lineage: 'l' });
    });

    it.each([
      ['a trailing comma in an array', '[1,]'],
      ['a trailing comma in an object', '{"a":1,}'],
      ['a missing comma', '[1 2]'],
      ['a missing colon', '{"a" 1}'],
      ['an unquoted key', '{a:1}'],
      ['a number key', '{1:1}'],
      ['a mismatched bracket', '[1}'],
      ['an extra closing bracket', '[1]]'],
      ['a leading zero', '[01]'],
      ['a lone minus', '[-]'],
      ['a minus before a non-digit', '[-a]'],
      ['a trailing dot', '[1.]'],
      ['a leading dot', '[.5]'],
      ['an empty exponent', '[1e]'],
      ['an exponent with only a sign', '[1e+]'],
      ['a plus sign', '[+1]'],
      ['a hexadecimal number', '[0x10]'],
      ['NaN', '[NaN]'],
      ['Infinity', '[-Infinity]'],
      ['a truncated literal', '[tru]'],
      ['a capitalised literal', '[True]'],
      ['a literal with extra letters', '[nulll]'],
      ['a bad escape', '["a\\x"]'],
      ['an escaped single quote', '["\\\'"]'],
      ['a short \\u escape', '["\\u12"]'],
      ['a non-hex \\u escape', '["\\u12G4"]'],
      ['a raw tab in a string', '["a\tb"]'],
      ['a raw newline in a string', '["a\nb"]'],
      ['a raw NUL in a string', '["a\u0000b"]'],
      ['a raw 0x1F in a string', '["\u001f"]'],
      ['a single-quoted string', "['a']"],
      ['a comment', '[1 /* c */]'],
      ['a no-break space as whitespace', '[1,\u00a02]'],
      ['a form feed as whitespace', '[1,\f2]'],
      ['a vertical tab as whitespace', '[1,\u000b2]'],
    ])('refuses %s deep inside resources', (_what, fragment) => {
      const body = tf(`"resources":[{"instances":[{"attributes":${fragment}}]}]`);
      expect(() => JSON.parse(body)).toThrow(SyntaxError);
      expect(refusal(body).message).toMatch(/^body is not valid JSON \(.+ at byte \d+/);
    });

    it('says which byte is wrong', () => {
      expect(refusal('{"version":4,x').message).toBe(
        'body is not valid JSON (unexpected "x" at byte 13)',
      );
      expect(refusal('{"a":"b\nc"}').message).toBe(
        'body is not valid JSON (unescaped control character byte 0x0A in a string at byte 7)',
      );
    });

    it.each([
      ['in a string', `${tf().slice(0, -1)},"resources":["abc`],
      ['after a key', '{"version"'],
      ['in a number', '{"version":4'],
      ['in a literal', '{"a":nul'],
      ['in an escape', '{"a":"\\u00'],
      ['in a multi-byte character', Buffer.from([...Buffer.from('{"a":"'), 0xe2, 0x82])],
      ['with nested containers open', '{"a":[{"b":[]'],
    ])('refuses a body that ends %s', (_where, body) => {
      expect(refusal(body).message).toMatch(/^body is not valid JSON \(unexpected end of body/);
    });

    it.each([
      ['a second value', `${tf()} {}`],
      ['a comma', `${tf()},`],
      ['a stray letter', `${tf()}\nx`],
      ['a NUL byte', `${tf()}\u0000`],
    ])('refuses %s after the object', (_what, body) => {
      expect(refusal(body).message).toMatch(
        /^body is not valid JSON .*after the end of the object/,
      );
    });

    it('refuses a UTF-8 byte order mark', () => {
      expect(inspect(tf())).toMatchObject({ kind: 'terraform' });
      expect(refusal(`\ufeff${tf()}`).message).toMatch(/byte order mark/);
    });

    it('refuses an empty body', () => {
      expect(refusal('').message).toBe('body is empty');
    });

    it('refuses a body of whitespace only', () => {
      expect(refusal(' \n\t\r ').message).toBe('body is empty (whitespace only)');
    });

    it.each([
      ['an array', '[]', 'an array'],
      ['a number', '4', 'a number'],
      ['a negative number', '-1', 'a number'],
      ['a string', '"state"', 'a string'],
      ['null', 'null', 'null'],
      ['a boolean', ' true', 'a boolean'],
    ])('refuses %s as the whole body', (_what, body, got) => {
      expect(refusal(body).message).toBe(`state must be a JSON object (got ${got})`);
    });

    it(`accepts nesting ${MAX_NESTING_DEPTH} deep and refuses one level more`, () => {
      const nested = (levels: number): string =>
        tf(`"resources":${'['.repeat(levels)}${']'.repeat(levels)}`);
      // The root object is the first level.
      expect(inspect(nested(MAX_NESTING_DEPTH - 1))).toMatchObject({ kind: 'terraform' });
      expect(refusal(nested(MAX_NESTING_DEPTH)).message).toMatch(
        /deeper than 10000 levels \(at byte \d+\)/,
      );
    });
  });

  describe('UTF-8', () => {
    /** A valid state with `bytes` inside a string in resources. */
    const withBytes = (...bytes: number[]): Buffer =>
      Buffer.concat([
        Buffer.from(tf().slice(0, -1) + ',"resources":["a'),
        Buffer.from(bytes),
        Buffer.from('z"]}'),
      ]);

    it.each([
      ['é (2 bytes)', [0xc3, 0xa9]],
      ['€ (3 bytes)', [0xe2, 0x82, 0xac]],
      ['😀 (4 bytes)', [0xf0, 0x9f, 0x98, 0x80]],
      ['U+D7FF, just below the surrogates', [0xed, 0x9f, 0xbf]],
      ['U+E000, just above the surrogates', [0xee, 0x80, 0x80]],
      ['U+FFFF', [0xef, 0xbf, 0xbf]],
      ['U+10FFFF, the last code point', [0xf4, 0x8f, 0xbf, 0xbf]],
      ['DEL (0x7F)', [0x7f]],
    ])('accepts %s in a string, split anywhere', (_what, bytes) => {
      const body = withBytes(...bytes);
      for (let size = 1; size <= bytes.length + 1; size++) {
        expect(inspect(body, [size])).toMatchObject({ kind: 'terraform' });
      }
      // And at every offset of a large chunk, where the word-at-a-time scan runs.
      for (let pad = 0; pad < 8; pad++) {
        const padded = withBytes(...Array<number>(70 + pad).fill(0x61), ...bytes, 0x62, 0x63);
        expect(inspect(padded)).toMatchObject({ kind: 'terraform' });
      }
    });

    it.each([
      ['a lone continuation byte', [0x80]],
      ['an overlong 2-byte form (0xC0 0xAF)', [0xc0, 0xaf]],
      ['an overlong 2-byte form (0xC1 0xBF)', [0xc1, 0xbf]],
      ['an overlong 3-byte form', [0xe0, 0x80, 0xaf]],
      ['an overlong 4-byte form', [0xf0, 0x80, 0x80, 0xaf]],
      ['an encoded UTF-16 surrogate', [0xed, 0xa0, 0x80]],
      ['a code point past U+10FFFF', [0xf4, 0x90, 0x80, 0x80]],
      ['the byte 0xF5', [0xf5, 0x80, 0x80, 0x80]],
      ['the byte 0xFF', [0xff]],
      ['a truncated 3-byte sequence', [0xe2, 0x82]],
      ['a truncated 4-byte sequence', [0xf0, 0x9f, 0x98]],
      ['a lead byte followed by ASCII', [0xc3, 0x41]],
    ])('refuses %s in a string', (_what, bytes) => {
      const body = withBytes(...bytes);
      expect(() => new TextDecoder('utf-8', { fatal: true }).decode(body)).toThrow();
      expect(refusal(body).message).toMatch(
        /^body is not valid UTF-8 \(.* at byte \d+ in a string\)$/,
      );
      for (let pad = 0; pad < 8; pad++) {
        const padded = withBytes(...Array<number>(70 + pad).fill(0x61), ...bytes);
        expect(() => inspect(padded)).toThrow(/not valid UTF-8/);
      }
    });

    it('refuses non-ASCII bytes outside strings', () => {
      const body = Buffer.concat([
        Buffer.from(tf().slice(0, -1) + ',"a":'),
        Buffer.from([0xc3, 0xa9]),
        Buffer.from('}'),
      ]);
      expect(refusal(body).message).toMatch(/^body is not valid JSON \(unexpected byte 0xC3/);
    });

    it('accepts escaped surrogate pairs, in either case of hex digit, split anywhere', () => {
      const body = tf(
        '"outputs":{"x":{"value":"\\ud83d\\ude00 \\uD83D\\uDE00"}},"resources":[{"\\udbff\\udfff":1}]',
      );
      const expected = expectedTerraform(JSON.parse(body) as Record<string, unknown>);
      expect(inspect(body)).toEqual(expected);
      expect(bytewise(body)).toEqual(expected);
    });
  });

  describe('what Terraform cannot write and the database cannot store', () => {
    const SURROGATE = /^state holds an unpaired UTF-16 surrogate escape \(near byte \d+\)/;

    it.each([
      ['a lone high surrogate at the end of a string', '"\\ud800"'],
      ['a high surrogate followed by a plain character', '"\\ud800x"'],
      ['a high surrogate followed by another escape', '"\\ud800\\n"'],
      ['two high surrogates', '"\\ud800\\ud800"'],
      ['a high surrogate followed by a non-surrogate escape', '"\\uDBFF\\u0041"'],
      ['a lone low surrogate', '"\\udc00"'],
      ['a low surrogate before a high one', '"\\udfff\\ud800"'],
    ])('refuses %s anywhere in the state, in any chunking', (_what, str) => {
      for (const body of [
        tf(`"outputs":{"x":{"value":${str}}}`),
        tf(`"resources":[{"instances":[{"attributes":{"tags":{${str}:"v"}}}]}]`),
        tf(`${str}:1`),
        tf(`"check_results":[[[${str}]]]`),
      ]) {
        expect(() => JSON.parse(body)).not.toThrow();
        expect(refusal(body).message).toMatch(SURROGATE);
        expect(outcome(body, [1, 2, 3, 5, 7])).toEqual({ error: refusal(body).message });
      }
    });

    it('refuses an unpaired surrogate in an OpenTofu envelope too', () => {
      const body = '{"encrypted_data":"\\ud800","encryption_version":"v0"}';
      expect(refusal(body).message).toMatch(SURROGATE);
    });

    it.each([
      ['lineage', tf().replace('"lin-1"', '"lin\\u0000-1"'), '"lineage"'],
      ['terraform_version', tf().replace('"1.11.4"', '"1.11\\u0000"'), '"terraform_version"'],
      ['an output name', tf('"outputs":{"a\\u0000b":{"value":1}}'), 'an output name'],
      [
        "a type name of an output's type",
        tf('"outputs":{"a":{"value":{"k":1},"type":["object",{"k":"num\\u0000ber"}]}}'),
        'a type name of an output\'s "type"',
      ],
    ])('refuses a NUL in %s, naming it', (_what, body, named) => {
      expect(refusal(body).message).toBe(
        `state has a NUL character in ${named}, which Terraform cannot write and the server cannot store`,
      );
    });

    it('accepts a NUL inside values and in attribute names of a type (Terraform writes both)', () => {
      const body = tf(
        '"outputs":{"nul":{"value":"\\u0000","type":"string"},"map":{"value":{"k\\u0000":"a\\u0000b"},"type":["map","string"]},' +
          // Terraform's type of `{ "k\0" = "v\0" }`: the key is an attribute name of the type.
          '"obj":{"value":{"k\\u0000":"v\\u0000"},"type":["object",{"k\\u0000":"string"}]}},' +
          '"resources":[{"mode":"managed","type":"terraform_data","name":"n","instances":[{"attributes":{"output":{"value":"\\u0000"}}}]}]',
      );
      const state = inspect(body);
      expect(state).toEqual(expectedTerraform(JSON.parse(body) as Record<string, unknown>));
      if (state.kind !== 'terraform') throw new Error('not a terraform state');
      expect(state.outputs.nul.value).toBe('\u0000');
      expect(state.outputs.map.value).toEqual({ 'k\u0000': 'a\u0000b' });
    });

    it('accepts a NUL in an OpenTofu envelope (nothing of it is stored as text)', () => {
      expect(inspect('{"encrypted_data":"\\u0000","encryption_version":"v0"}')).toEqual({
        kind: 'encrypted',
        encryptionVersion: 'v0',
      });
    });
  });

  describe('top-level keys', () => {
    it.each([
      ['version', '{"version":4,"version":4,"serial":3,"lineage":"l"}', '"version"'],
      ['serial', `${tf().slice(0, -1)},"serial":3}`, '"serial"'],
      ['outputs', tf('"outputs":{},"outputs":{}'), '"outputs"'],
      ['an escaped spelling', `${tf().slice(0, -1)},"vers\\u0069on":4}`, '"version"'],
    ])('refuses the top-level key %s twice', (_what, body, key) => {
      expect(refusal(body).message).toBe(`state has the top-level key ${key} more than once`);
    });

    it('refuses a duplicate unknown top-level key without naming it', () => {
      expect(refusal(tf('"secret-name":1,"secret-name":2')).message).toBe(
        'state has a duplicate top-level key',
      );
    });

    it('leaves duplicate keys below the top level to JSON.parse (last one wins)', () => {
      const body = tf('"outputs":{"a":{"value":1},"a":{"value":2}},"resources":[{"x":1,"x":2}]');
      expect(inspect(body)).toMatchObject({ outputs: { a: { value: 2 } } });
    });

    it('refuses top-level key names over 64 KiB in total', () => {
      expect(inspect(tf(`"${'k'.repeat(60000)}":1`))).toMatchObject({ kind: 'terraform' });
      expect(refusal(tf(`"${'k'.repeat(70000)}":1`)).message).toMatch(
        /top-level key names are too long/,
      );
      const manyKeys = Array.from({ length: 20 }, (_, i) => `"${i}${'k'.repeat(4000)}":1`);
      expect(refusal(tf(manyKeys.join(','))).message).toMatch(/top-level key names are too long/);
    });
  });

  describe('Terraform state rules', () => {
    const body = (members: string): string => `{${members}}`;

    it('reads version, terraform_version, serial and lineage', () => {
      expect(inspect(tf())).toEqual({
        kind: 'terraform',
        version: 4,
        terraformVersion: '1.11.4',
        serial: 3,
        lineage: 'lin-1',
        outputs: {},
        remoteStates: [],
      });
    });

    it('reads the fields in any key order', () => {
      expect(inspect('{"outputs":{},"lineage":"l","serial":0,"version":4}')).toMatchObject({
        serial: 0,
        lineage: 'l',
      });
    });

    it.each([
      ['missing', '"serial":1,"lineage":"l"', 'state has no "version"'],
      ['3', '"version":3,"serial":1,"lineage":"l"', 'state "version" must be 4 (got 3)'],
      ['5', '"version":5,"serial":1,"lineage":"l"', 'state "version" must be 4 (got 5)'],
      [
        'a string',
        '"version":"4","serial":1,"lineage":"l"',
        'state "version" must be 4 (got a string)',
      ],
      ['null', '"version":null,"serial":1,"lineage":"l"', 'state "version" must be 4 (got null)'],
      ['4.0', '"version":4.0,"serial":1,"lineage":"l"', 'state "version" must be 4 (got 4.0)'],
      ['4e0', '"version":4e0,"serial":1,"lineage":"l"', 'state "version" must be 4 (got 4e0)'],
    ])('refuses a version that is %s', (_what, members, message) => {
      expect(refusal(body(members)).message).toBe(message);
    });

    it.each([
      ['missing', '"version":4,"lineage":"l"', 'state has no "serial"'],
      ['negative', '"version":4,"serial":-1,"lineage":"l"', 'got -1'],
      ['fractional', '"version":4,"serial":1.5,"lineage":"l"', 'got 1.5'],
      ['written with an exponent', '"version":4,"serial":1e3,"lineage":"l"', 'got 1e3'],
      ['written as 1.0', '"version":4,"serial":1.0,"lineage":"l"', 'got 1.0'],
      ['a string', '"version":4,"serial":"1","lineage":"l"', 'got a string'],
      ['null', '"version":4,"serial":null,"lineage":"l"', 'got null'],
      [
        'past the safe integers',
        '"version":4,"serial":9007199254740992,"lineage":"l"',
        'got 9007199254740992',
      ],
    ])('refuses a serial that is %s', (_what, members, message) => {
      const err = refusal(body(members));
      expect(err.message).toContain(message);
      if (!message.startsWith('state has no')) {
        expect(err.message).toBe(`state "serial" must be a non-negative integer (${message})`);
      }
    });

    it('accepts serials 0 and 2^53 - 1', () => {
      expect(inspect(body('"version":4,"serial":0,"lineage":"l"'))).toMatchObject({ serial: 0 });
      expect(inspect(body('"version":4,"serial":9007199254740991,"lineage":"l"'))).toMatchObject({
        serial: Number.MAX_SAFE_INTEGER,
      });
    });

    it.each([
      ['missing', '"version":4,"serial":1', 'state has no "lineage"'],
      [
        'empty',
        '"version":4,"serial":1,"lineage":""',
        'state "lineage" must be a non-empty string (got "")',
      ],
      [
        'a number',
        '"version":4,"serial":1,"lineage":7',
        'state "lineage" must be a non-empty string (got a number)',
      ],
      [
        'null',
        '"version":4,"serial":1,"lineage":null',
        'state "lineage" must be a non-empty string (got null)',
      ],
      [
        'longer than 4 KiB',
        `"version":4,"serial":1,"lineage":"${'l'.repeat(5000)}"`,
        'state "lineage" is too long',
      ],
    ])('refuses a lineage that is %s', (_what, members, message) => {
      expect(refusal(body(members)).message).toBe(message);
    });

    it('unescapes the lineage', () => {
      expect(inspect(body('"version":4,"serial":1,"lineage":"a\\u002Db\\"c"'))).toMatchObject({
        lineage: 'a-b"c',
      });
    });

    it('reads an absent or null terraform_version as null', () => {
      expect(inspect(body('"version":4,"serial":1,"lineage":"l"'))).toMatchObject({
        terraformVersion: null,
      });
      expect(
        inspect(body('"version":4,"terraform_version":null,"serial":1,"lineage":"l"')),
      ).toMatchObject({ terraformVersion: null });
    });

    it('refuses a terraform_version that is not a string', () => {
      expect(
        refusal(body('"version":4,"terraform_version":1.11,"serial":1,"lineage":"l"')).message,
      ).toBe('state "terraform_version" must be a string (got a number)');
    });

    it('reports the Terraform rule a body breaks when it also misses version', () => {
      expect(refusal('{"serial":-1}').message).toBe(
        'state "serial" must be a non-negative integer (got -1)',
      );
    });
  });

  describe('outputs', () => {
    it('defaults to no outputs', () => {
      expect(inspect(tf())).toMatchObject({ outputs: {} });
    });

    it('keeps value, type and sensitive, and only those', () => {
      const result = inspect(
        tf(
          '"outputs":{"a":{"value":{"k":[1,"x",null]},"type":["object",{"k":"dynamic"}],"sensitive":false,"extra":1},' +
            '"b":{"value":null},"__proto__":{"value":"p"}}',
        ),
      );
      expect(result.kind).toBe('terraform');
      if (result.kind !== 'terraform') return;
      expect(result.outputs.a).toEqual({
        value: { k: [1, 'x', null] },
        type: ['object', { k: 'dynamic' }],
        sensitive: false,
      });
      expect(Object.keys(result.outputs.a)).toEqual(['value', 'type', 'sensitive']);
      expect(result.outputs.b).toEqual({ value: null });
      expect(Object.keys(result.outputs.b)).toEqual(['value']);
      // "__proto__" is an output like any other, not the object's prototype.
      expect(Object.keys(result.outputs)).toEqual(['a', 'b', '__proto__']);
      expect(Object.getPrototypeOf(result.outputs)).toBe(Object.prototype);
      expect(Object.getOwnPropertyDescriptor(result.outputs, '__proto__')?.value).toEqual({
        value: 'p',
      });
    });

    it.each([
      ['an array', '[]', 'state "outputs" must be an object (got an array)'],
      ['null', 'null', 'state "outputs" must be an object (got null)'],
      ['a string', '"x"', 'state "outputs" must be an object (got a string)'],
      [
        'a member that is a number',
        '{"a":1}',
        'state "outputs" has a member that is not an object',
      ],
      [
        'a member that is an array',
        '{"a":[]}',
        'state "outputs" has a member that is not an object',
      ],
      ['a member that is null', '{"a":null}', 'state "outputs" has a member that is not an object'],
      [
        'a member with no value',
        '{"a":{"type":"string"}}',
        'state "outputs" has a member with no "value"',
      ],
      [
        'a non-boolean sensitive',
        '{"a":{"value":1,"sensitive":"true"}}',
        'state "outputs" has a member whose "sensitive" is not a boolean',
      ],
    ])('refuses outputs that are (or hold) %s', (_what, outputs, message) => {
      expect(refusal(tf(`"outputs":${outputs}`)).message).toBe(message);
    });

    it('refuses outputs larger than maxOutputsBytes, and accepts them at the limit', () => {
      const outputs = '{"a":{"value":"0123456789"}}';
      const body = tf(`"outputs":${outputs}`);
      expect(inspect(body, undefined, { maxOutputsBytes: outputs.length })).toMatchObject({
        outputs: { a: { value: '0123456789' } },
      });
      expect(refusal(body, { maxOutputsBytes: outputs.length - 1 }).message).toBe(
        `state "outputs" is larger than the ${outputs.length - 1}-byte limit`,
      );
    });

    it('limits only the outputs: bigger resources pass', () => {
      const body = tf(`"outputs":{},"resources":[${'"xxxxxxxxxx",'.repeat(1000)}1]`);
      expect(inspect(body, [100], { maxOutputsBytes: 64 })).toMatchObject({ kind: 'terraform' });
    });

    it('refuses oversized outputs while they stream, before the body ends', () => {
      const body = Buffer.from(
        tf(`"outputs":{"a":{"value":"${'v'.repeat(10000)}"}},"resources":[]`),
      );
      const inspector = new StateInspector({ maxOutputsBytes: 1000 });
      let thrownAt = -1;
      for (let offset = 0; offset < body.length && thrownAt < 0; offset += 256) {
        try {
          inspector.write(body.subarray(offset, offset + 256));
        } catch (err) {
          expect(err).toBeInstanceOf(InvalidStateError);
          thrownAt = offset;
        }
      }
      expect(thrownAt).toBeGreaterThan(0);
      expect(thrownAt).toBeLessThan(2000);
    });

    it('refuses an invalid maxOutputsBytes option as a programming error', () => {
      expect(() => new StateInspector({ maxOutputsBytes: -1 })).toThrow(RangeError);
      expect(() => new StateInspector({ maxOutputsBytes: 1.5 })).toThrow(RangeError);
    });
  });

  describe('OpenTofu encrypted envelopes', () => {
    const envelope =
      '"meta":{"k":"bWV0YQ=="},"encrypted_data":"ZGF0YQ==","encryption_version":"v0"';

    it('reads the envelope with its keys in any order', () => {
      const orders = [
        `{${envelope}}`,
        '{"encryption_version":"v0","encrypted_data":"ZGF0YQ==","meta":{}}',
        '{"encrypted_data":"ZGF0YQ==","encryption_version":"v0"}',
      ];
      for (const body of orders) {
        expect(inspect(body)).toEqual({ kind: 'encrypted', encryptionVersion: 'v0' });
        expect(bytewise(body)).toEqual({ kind: 'encrypted', encryptionVersion: 'v0' });
      }
    });

    it('applies no Terraform rules to an envelope, whatever the key order', () => {
      for (const body of [
        '{"serial":-1,"lineage":"","outputs":[],"encrypted_data":"x","encryption_version":"v0"}',
        '{"encrypted_data":"x","serial":"s","outputs":7,"encryption_version":"v0"}',
      ]) {
        expect(inspect(body)).toEqual({ kind: 'encrypted', encryptionVersion: 'v0' });
      }
    });

    it.each([
      [
        'encrypted_data without encryption_version',
        '{"encrypted_data":"x","meta":{}}',
        'encrypted state has "encrypted_data" but no "encryption_version"',
      ],
      [
        'encryption_version without encrypted_data',
        '{"encryption_version":"v0"}',
        'encrypted state has "encryption_version" but no "encrypted_data"',
      ],
      [
        'a number as encrypted_data',
        '{"encrypted_data":5,"encryption_version":"v0"}',
        'encrypted state "encrypted_data" must be a string (got a number)',
      ],
      [
        'null as encrypted_data',
        '{"encryption_version":"v0","encrypted_data":null}',
        'encrypted state "encrypted_data" must be a string (got null)',
      ],
      [
        'an object as encryption_version',
        '{"encrypted_data":"x","encryption_version":{}}',
        'encrypted state "encryption_version" must be a string (got an object)',
      ],
      [
        'an empty encryption_version',
        '{"encrypted_data":"x","encryption_version":""}',
        'encrypted state "encryption_version" must not be empty',
      ],
      [
        'a Terraform version before the envelope',
        '{"version":4,"encrypted_data":"x","encryption_version":"v0"}',
        'body mixes a Terraform state "version" with an OpenTofu encryption envelope',
      ],
      [
        'a Terraform version after the envelope',
        '{"encryption_version":"v0","encrypted_data":"x","version":4}',
        'body mixes a Terraform state "version" with an OpenTofu encryption envelope',
      ],
    ])('refuses %s', (_what, body, message) => {
      expect(refusal(body).message).toBe(message);
    });
  });

  describe('streaming', () => {
    it('write() throws at the first byte that breaks the syntax', () => {
      const inspector = new StateInspector();
      inspector.write(Buffer.from('{"version":4,'));
      expect(() => inspector.write(Buffer.from('"serial" 1'))).toThrow(
        'body is not valid JSON (unexpected "1" at byte 22)',
      );
    });

    it('write() throws at a wrong version before the rest of the body arrives', () => {
      const inspector = new StateInspector();
      expect(() => inspector.write(Buffer.from('{\n  "version": 3,\n  "ser'))).toThrow(
        'state "version" must be 4 (got 3)',
      );
    });

    it('write() throws as soon as the root turns out not to be an object', () => {
      expect(() => new StateInspector().write(Buffer.from('  ['))).toThrow(InvalidStateError);
    });

    it('holds a Terraform rule broken before "version" until "version" arrives', () => {
      const inspector = new StateInspector();
      inspector.write(Buffer.from('{"serial":-1,'));
      expect(() => inspector.write(Buffer.from('"version":4,'))).toThrow(
        'state "serial" must be a non-negative integer (got -1)',
      );
    });

    it('repeats the same error on every later call', () => {
      const inspector = new StateInspector();
      let first: unknown;
      try {
        inspector.write(Buffer.from('{"version":x'));
      } catch (err) {
        first = err;
      }
      expect(first).toBeInstanceOf(InvalidStateError);
      expect(() => inspector.write(Buffer.from('}'))).toThrow(first as Error);
      expect(() => inspector.end()).toThrow(first as Error);
    });

    it('ignores empty chunks', () => {
      const inspector = new StateInspector();
      for (const part of ['', tf().slice(0, 10), '', tf().slice(10), '']) {
        inspector.write(Buffer.from(part));
      }
      expect(inspector.end()).toMatchObject({ kind: 'terraform' });
    });

    it('refuses use after end()', () => {
      const inspector = new StateInspector();
      inspector.write(Buffer.from(tf()));
      inspector.end();
      expect(() => inspector.write(Buffer.from(' '))).toThrow(/after end/);
      expect(() => inspector.end()).toThrow(/twice/);
    });
  });

  describe('error messages carry no state content', () => {
    const SECRET = 'hunter2-SECRET';
    it.each([
      [
        'a bad sensitive flag',
        tf(`"outputs":{"${SECRET}":{"value":"${SECRET}","sensitive":"${SECRET}"}}`),
      ],
      ['a control character in a secret', tf(`"resources":[{"password":"${SECRET}\u0001"}]`)],
      ['a bad escape in a secret', tf(`"resources":[{"password":"${SECRET}\\q"}]`)],
      [
        'a secret lineage that is too long',
        `{"version":4,"serial":1,"lineage":"${SECRET.repeat(400)}"}`,
      ],
      ['a secret as version', `{"version":"${SECRET}"}`],
      ['a secret as a duplicated key', tf(`"${SECRET}":1,"${SECRET}":1`)],
      ['a secret in a long number', tf(`"serial":-${'9'.repeat(40)}`)],
    ])('%s', (_what, body) => {
      const { message } = refusal(body);
      expect(message).not.toContain(SECRET);
      expect(message).not.toContain('hunter2');
      expect(message).not.toContain('9'.repeat(25));
    });
  });

  describe('properties', () => {
    const jsonValue = fc.oneof(
      fc.jsonValue({ maxDepth: 4 }),
      fc.jsonValue({ maxDepth: 3, stringUnit: 'binary' }),
      fc.jsonValue({ maxDepth: 3, stringUnit: 'grapheme' }),
    );
    const outputs = fc.dictionary(
      fc.string({ unit: 'binary', maxLength: 8 }),
      fc.record(
        { value: jsonValue, type: jsonValue, sensitive: fc.boolean() },
        { requiredKeys: ['value'] },
      ),
      { maxKeys: 4 },
    );
    const stateDoc = fc.record(
      {
        version: fc.constant(4),
        terraform_version: fc.string({ maxLength: 10 }),
        serial: fc.maxSafeNat(),
        lineage: fc.string({ unit: 'binary', minLength: 1, maxLength: 40 }),
        outputs,
        resources: fc.array(jsonValue, { maxLength: 3 }),
        check_results: jsonValue,
      },
      { requiredKeys: ['version', 'serial', 'lineage'] },
    );
    const stateText = fc
      .tuple(stateDoc, fc.constantFrom(undefined, 2, '\t'))
      .map(([doc, indent]) => JSON.stringify(doc, null, indent));

    it('any JSON wrapped as a v4 state reads as JSON.parse reads it, in any chunking (unless Terraform could not write it)', () => {
      fc.assert(
        fc.property(stateText, chunkSizes, (text, sizes) => {
          const doc = JSON.parse(text) as Record<string, unknown>;
          if (unwritable(doc)) {
            const whole = outcome(text);
            expect(whole).toEqual({ error: expect.stringMatching(UNWRITABLE) as string });
            expect(outcome(text, sizes)).toEqual(whole);
            return;
          }
          const expected = expectedTerraform(doc);
          expect(inspect(text, sizes)).toEqual(expected);
          expect(inspect(text)).toEqual(expected);
        }),
        { numRuns: 400 },
      );
    });

    /** Every string of `value` (member names too) through `f`. */
    function mapStrings(value: unknown, f: (s: string) => string): unknown {
      if (typeof value === 'string') return f(value);
      if (Array.isArray(value)) return value.map((v) => mapStrings(v, f));
      if (typeof value !== 'object' || value === null) return value;
      const out: Record<string, unknown> = {};
      for (const [k, v] of Object.entries(value)) {
        Object.defineProperty(out, f(k), {
          value: mapStrings(v, f),
          enumerable: true,
          writable: true,
          configurable: true,
        });
      }
      return out;
    }

    it('a NUL anywhere in output values and resources is kept as JSON.parse reads it', () => {
      const nulled = fc
        .tuple(stateDoc, fc.nat({ max: 8 }))
        .map(([doc, at]) => {
          const addNul = (s: string): string =>
            s.slice(0, at % (s.length + 1)) + '\u0000' + s.slice(at % (s.length + 1));
          const outputs: Record<string, unknown> = {};
          for (const [name, o] of Object.entries(doc.outputs ?? {})) {
            outputs[name] = { ...o, value: mapStrings(o.value, addNul) };
          }
          return JSON.stringify({ ...doc, outputs, resources: mapStrings(doc.resources, addNul) });
        })
        .filter((text) => !unwritable(JSON.parse(text) as Record<string, unknown>));
      fc.assert(
        fc.property(nulled, chunkSizes, (text, sizes) => {
          const expected = expectedTerraform(JSON.parse(text) as Record<string, unknown>);
          expect(inspect(text, sizes)).toEqual(expected);
        }),
        { numRuns: 300 },
      );
    });

    it('an unpaired surrogate escape put into any string of a state is refused, in any chunking', () => {
      const surrogate = fc.oneof(
        fc.integer({ min: 0xd800, max: 0xdbff }),
        fc.integer({ min: 0xdc00, max: 0xdfff }),
      );
      const MARK = '\u0001\u0002mark\u0002\u0001';
      const broken = fc
        .tuple(
          stateDoc.filter(
            (d) => !unwritable(JSON.parse(JSON.stringify(d)) as Record<string, unknown>),
          ),
          fc.nat(),
          surrogate,
          fc.boolean(),
        )
        .map(([doc, at, unit, upper]) => {
          // Into one of the strings (member names too): the n-th one met.
          let count = 0;
          mapStrings(doc, (str) => (count++, str));
          const target = at % count;
          let seen = 0;
          const marked = mapStrings(doc, (str) => (seen++ === target ? str + MARK : str));
          const hex = unit.toString(16);
          const escape = `\\u${upper ? hex.toUpperCase() : hex}`;
          // A high one followed by something other than a low escape; a low one alone.
          return JSON.stringify(marked).replace(
            JSON.stringify(MARK).slice(1, -1),
            escape + (unit < 0xdc00 ? 'x' : ''),
          );
        });
      fc.assert(
        fc.property(broken, chunkSizes, (text, sizes) => {
          expect(holds(JSON.parse(text), hasLoneSurrogate)).toBe(true);
          const whole = outcome(text);
          expect(whole).toEqual({
            error: expect.stringMatching(/^state holds an unpaired UTF-16 surrogate/) as string,
          });
          expect(outcome(text, sizes)).toEqual(whole);
        }),
        { numRuns: 300 },
      );
    });

    it('nesting around the depth limit, in outputs or resources, is accepted up to it and refused past it', () => {
      fc.assert(
        fc.property(
          fc.integer({ min: MAX_NESTING_DEPTH - 3, max: MAX_NESTING_DEPTH + 3 }),
          fc.constantFrom('outputs', 'resources'),
          fc.constantFrom('[]', '{"k":}'),
          chunkSizes,
          (levels, where, shape, sizes) => {
            // Root object, then "outputs" object and its member: two levels before the value.
            const above = where === 'outputs' ? 3 : 1;
            const inner = levels - above;
            const [open, close] = shape === '[]' ? ['[', ']'] : ['{"k":', '}'];
            const value = `${open.repeat(inner - 1)}${shape === '[]' ? '[]' : '{}'}${close.repeat(inner - 1)}`;
            const body =
              where === 'outputs'
                ? tf(`"outputs":{"x":{"value":${value}}}`)
                : tf(`"resources":${value}`);
            const result = outcome(body, sizes);
            if (levels <= MAX_NESTING_DEPTH) expect(result).toHaveProperty('state');
            else
              expect(result).toEqual({
                error: expect.stringMatching(/deeper than 10000 levels/) as string,
              });
          },
        ),
        { numRuns: 40 },
      );
    });

    it('huge counts of outputs, keys and array items (NULs and surrogate pairs among them) read as JSON.parse reads them', () => {
      fc.assert(
        fc.property(
          fc.integer({ min: 1, max: 60_000 }),
          fc.constantFrom('\u0000', '\ud83d\ude00', 'é', ''),
          chunkSizes,
          (count, extra, sizes) => {
            const outputs: Record<string, unknown> = {};
            for (let i = 0; i < Math.min(count, 5000); i++) {
              outputs[`o${i}`] = { value: `${extra}${i}`, type: 'string' };
            }
            const tags: Record<string, string> = {};
            for (let i = 0; i < count; i++) tags[`k${i}${extra}`] = extra;
            const doc = {
              version: 4,
              serial: 1,
              lineage: 'l',
              outputs,
              resources: [{ tags, list: Array.from({ length: count }, () => extra) }],
            };
            const text = JSON.stringify(doc);
            expect(inspect(text, sizes.length > 0 ? sizes.map((n) => n * 997) : undefined)).toEqual(
              expectedTerraform(JSON.parse(text) as Record<string, unknown>),
            );
          },
        ),
        { numRuns: 15 },
      );
    });

    const jsonChar = fc.constantFrom(
      ...'{}[]:,"\\ \n\t\r0123456789-+.eEtrufalsnux/*\'',
      '\u0000',
      '\u001f',
      '\u00a0',
      '\u2028',
      '\ufeff',
      'é',
      '😀',
      '\ud800',
    );
    const edit = fc.record({
      op: fc.constantFrom('delete', 'insert', 'replace', 'truncate'),
      at: fc.nat(),
      ch: jsonChar,
    });
    const mutated = fc
      .tuple(stateText, fc.array(edit, { minLength: 1, maxLength: 3 }))
      .map(([text, edits]) => {
        for (const { op, at, ch } of edits) {
          const p = text.length === 0 ? 0 : at % text.length;
          if (op === 'delete') text = text.slice(0, p) + text.slice(p + 1);
          else if (op === 'insert') text = text.slice(0, p) + ch + text.slice(p);
          else if (op === 'replace') text = text.slice(0, p) + ch + text.slice(p + 1);
          else text = text.slice(0, p);
        }
        return text;
      });
    const anyText = fc.oneof(
      mutated,
      fc.string({ unit: jsonChar, maxLength: 40 }),
      fc.string({ unit: jsonChar, maxLength: 40 }).map((s) => `{${s}`),
      fc.string({ unit: 'binary', maxLength: 20 }),
      fc.jsonValue().map((v) => JSON.stringify(v)),
    );
    const isSyntaxRefusal = (message: string): boolean =>
      /^body (is not valid|is empty|starts with)/.test(message);

    /** The rules every outcome must satisfy against JSON.parse of the same text. */
    function checkAgainstJsonParse(text: string, result: Outcome): void {
      let parsed: unknown;
      try {
        parsed = JSON.parse(text);
      } catch {
        expect(result).toHaveProperty('error');
        return;
      }
      if ('error' in result) {
        // JSON.parse took it, so the refusal must name a state rule, not the syntax.
        expect(isSyntaxRefusal(result.error)).toBe(false);
        return;
      }
      const doc = parsed as Record<string, unknown>;
      // Accepted: so nothing in it is what Terraform cannot write.
      expect(holds(doc, hasLoneSurrogate)).toBe(false);
      if (result.state.kind === 'terraform') {
        expect(unwritable(doc)).toBe(false);
        expect(result.state).toEqual(expectedTerraform(doc));
      } else expect(result.state.encryptionVersion).toBe(doc.encryption_version);
    }

    it('text JSON.parse refuses is refused with InvalidStateError, in any chunking, with the same message', () => {
      fc.assert(
        fc.property(anyText, chunkSizes, (text, sizes) => {
          // The inspector sees UTF-8, where a lone surrogate has become U+FFFD.
          const body = Buffer.from(text, 'utf8');
          const whole = outcome(body);
          checkAgainstJsonParse(body.toString('utf8'), whole);
          expect(outcome(body, sizes)).toEqual(whole);
        }),
        { numRuns: 3000 },
      );
    });

    it('bytes that are not UTF-8 are refused; others are judged as their text', () => {
      const byteEdit = fc.record({
        op: fc.constantFrom('delete', 'insert', 'replace'),
        at: fc.nat(),
        byte: fc.oneof(fc.integer({ min: 0x80, max: 0xff }), fc.integer({ min: 0, max: 0xff })),
      });
      const bodies = fc.oneof(
        fc.uint8Array({ maxLength: 40 }).map((a) => Buffer.from(a)),
        fc
          .tuple(stateText, fc.array(byteEdit, { minLength: 1, maxLength: 2 }))
          .map(([text, edits]) => {
            let bytes = Buffer.from(text, 'utf8');
            for (const { op, at, byte } of edits) {
              const p = at % bytes.length;
              const b = Buffer.from([byte]);
              if (op === 'delete')
                bytes = Buffer.concat([bytes.subarray(0, p), bytes.subarray(p + 1)]);
              else if (op === 'insert')
                bytes = Buffer.concat([bytes.subarray(0, p), b, bytes.subarray(p)]);
              else bytes = Buffer.concat([bytes.subarray(0, p), b, bytes.subarray(p + 1)]);
            }
            return bytes;
          }),
      );
      const decoder = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });
      fc.assert(
        fc.property(bodies, chunkSizes, (body, sizes) => {
          const whole = outcome(body);
          expect(outcome(body, sizes)).toEqual(whole);
          let text: string;
          try {
            text = decoder.decode(body);
          } catch {
            expect(whole).toHaveProperty('error');
            return;
          }
          checkAgainstJsonParse(text, whole);
        }),
        { numRuns: 2000 },
      );
    });
  });
});

describe('StateInspector: terraform_remote_state data sources', () => {
  it('finds both data sources of the consumer fixture, whatever the chunking, with config and outputs as read', () => {
    const body = fs.readFileSync(path.join(FIXTURES, 'consumer.tfstate'));
    for (const size of [1, 7, 64, body.length]) {
      const inspector = new StateInspector();
      for (let i = 0; i < body.length; i += size) inspector.write(body.subarray(i, i + size));
      const result = inspector.end();
      if (result.kind !== 'terraform') throw new Error('not a terraform state');
      const byName = Object.fromEntries(result.remoteStates.map((r) => [r.name, r]));
      expect(Object.keys(byName).sort()).toEqual(['dns', 'network']);
      expect(byName.network.backend).toBe('s3');
      expect(byName.network.config).toMatchObject({
        bucket: 'tfstate',
        key: 'platform/network/terraform.tfstate',
      });
      expect(byName.network.outputs).toMatchObject({
        vpc_id: outputDigests(digestKeys(Buffer.alloc(32)), { v: 'vpc-0abc' }).v,
      });
      expect(byName.dns.backend).toBe('http');
      expect(byName.dns.config).toMatchObject({
        address: 'http://127.0.0.1:8080/v1/backend/platform/dns',
      });
    }
  });

  it('ignores managed resources and data sources of other types', () => {
    const body = `{"version":4,"serial":1,"lineage":"l","resources":[{"mode":"managed","type":"terraform_remote_state","name":"x","instances":[]},{"mode":"data","type":"http","name":"y","instances":[{"attributes":{"url":"terraform_remote_state"}}]}]}`;
    const inspector = new StateInspector();
    inspector.write(Buffer.from(body));
    expect(inspector.end()).toMatchObject({ remoteStates: [] });
  });
});
