import { Injectable, OnModuleInit } from '@nestjs/common';
import { createHash, createHmac, Hash, Hmac, randomBytes } from 'node:crypto';
import { SharedSecrets } from '../database/shared-secrets.service';

/**
 * Keyed digests of output values, scheme v2: equal values give equal digests (whatever their key
 * order or escaping), and a digest tells nothing about the value to someone without the server's
 * key. Unlike v1 (an HMAC of canonical JSON with sorted keys, which needs the whole value in
 * memory to sort), v2 is computed while the value streams by, in memory bounded by its nesting:
 *
 * - scalars and arrays are written inline into the enclosing hash: `n`, `t`, `f`; a number as
 *   `d<String(Number(text))>;` (a number text over 1,024 bytes as `dx<sha256 of the text>;`, so
 *   such numbers are compared by spelling); a string as `"` + its code points in UTF-8 with `"`,
 *   `\` and control characters escaped (`\"`, `\\`, `\u00xx`) and lone surrogates in WTF-8 +
 *   `"`; an array as `[` + its elements + `]`;
 * - an object is `{` + sha256(`o` || member count (u64) || the sum modulo 2^256 of one term per
 *   member), each term sha256(memberKey || the key, as a string || the value): the sum makes
 *   the order of members irrelevant without holding them, and the terms are keyed, so nobody
 *   without the key can search for two objects whose sums collide;
 * - an output's digest is `v2:` + hex HMAC-SHA256(key, `statehouse output v2\n` || value).
 *
 * Duplicate keys inside a value (which Terraform never writes) each count when streamed; a
 * parsed value has only the last one.
 */
export const DIGEST_PREFIX = 'v2:';

/** The keys of scheme v2, derived once from the server's graph digest key. */
export interface DigestKeys {
  output: Buffer;
  member: Buffer;
}

export function digestKeys(key: Buffer): DigestKeys {
  return {
    output: key,
    member: createHmac('sha256', key).update('statehouse member key v2').digest(),
  };
}

const OUTPUT_DOMAIN = Buffer.from('statehouse output v2\n');
const LONG_NUMBER = 1024;
const SCRATCH_BYTES = 16 * 1024;
const HEX = '0123456789abcdef';

/** One open object: the running sum of its member terms, and the term being written. */
interface ObjectFrame {
  sum: Uint32Array;
  count: number;
  member: Hash | null;
}

/**
 * The digest of one value, fed as events (a tokenizer's, or a walk over a parsed value). String
 * content arrives as raw UTF-8 runs that hold no `"`, `\` or control byte (`raw`) and as UTF-16
 * code units from escapes or JS strings (`unit`).
 */
export class ValueDigest {
  private readonly top: Hmac;
  private sink: Hash | Hmac;
  private readonly frames: ObjectFrame[] = [];
  private readonly scratch = Buffer.allocUnsafe(SCRATCH_BYTES);
  private used = 0;
  private pendingHigh = 0; // a high surrogate waiting for its low half

  constructor(private readonly keys: DigestKeys) {
    this.top = createHmac('sha256', keys.output).update(OUTPUT_DOMAIN);
    this.sink = this.top;
  }

  literal(kind: 'n' | 't' | 'f'): void {
    this.byte(kind.charCodeAt(0));
  }

  /** A JSON number's text (valid JSON grammar). */
  number(text: string): void {
    const canon =
      text.length > LONG_NUMBER
        ? `x${createHash('sha256').update(text).digest('hex')}`
        : String(Number(text));
    this.ascii(`d${canon};`);
  }

  /** A number whose text is over 1,024 bytes, by the sha256 (hex) of its text. */
  longNumber(sha256Hex: string): void {
    this.ascii(`dx${sha256Hex};`);
  }

  /** A number of a parsed value. */
  numberValue(value: number): void {
    this.ascii(`d${String(value)};`);
  }

  stringStart(): void {
    this.byte(0x22);
  }

  stringEnd(): void {
    this.flushSurrogate();
    this.byte(0x22);
  }

  /** Raw UTF-8 string content with no `"`, `\` or byte below 0x20 in it. */
  raw(buf: Buffer, start: number, end: number): void {
    if (start >= end) return;
    this.flushSurrogate();
    const len = end - start;
    if (len > 512) {
      this.flush();
      this.sink.update(buf.subarray(start, end));
      return;
    }
    if (this.used + len > SCRATCH_BYTES) this.flush();
    buf.copy(this.scratch, this.used, start, end);
    this.used += len;
  }

  /** One UTF-16 code unit of string content (from an escape, or a JS string). */
  unit(u: number): void {
    if (this.pendingHigh !== 0) {
      if (u >= 0xdc00 && u <= 0xdfff) {
        const cp = 0x10000 + ((this.pendingHigh - 0xd800) << 10) + (u - 0xdc00);
        this.pendingHigh = 0;
        this.byte(0xf0 | (cp >> 18));
        this.byte(0x80 | ((cp >> 12) & 0x3f));
        this.byte(0x80 | ((cp >> 6) & 0x3f));
        this.byte(0x80 | (cp & 0x3f));
        return;
      }
      this.flushSurrogate();
    }
    if (u >= 0xd800 && u <= 0xdbff) {
      this.pendingHigh = u;
      return;
    }
    this.scalarUnit(u);
  }

  /** A JS string's content. */
  text(s: string): void {
    if (!NEEDS_UNITS.test(s)) {
      this.flushSurrogate();
      const bytes = Buffer.from(s, 'utf8');
      this.raw(bytes, 0, bytes.length);
      return;
    }
    for (let i = 0; i < s.length; i++) this.unit(s.charCodeAt(i));
  }

  openArray(): void {
    this.byte(0x5b);
  }

  closeArray(): void {
    this.byte(0x5d);
  }

  openObject(): void {
    this.flush();
    this.frames.push({ sum: new Uint32Array(8), count: 0, member: null });
  }

  /** A member's key begins (its content follows, then `stringEnd`, then its value). */
  keyStart(): void {
    const frame = this.frames[this.frames.length - 1];
    this.endMember(frame);
    frame.member = createHash('sha256').update(this.keys.member);
    frame.count++;
    this.sink = frame.member;
    this.byte(0x22);
  }

  closeObject(): void {
    const frame = this.frames.pop() as ObjectFrame;
    this.endMember(frame);
    const head = Buffer.alloc(9);
    head[0] = 0x6f; // 'o'
    head.writeBigUInt64BE(BigInt(frame.count), 1);
    const sum = Buffer.alloc(32);
    for (let w = 0; w < 8; w++) sum.writeUInt32BE(frame.sum[w], w * 4);
    const digest = createHash('sha256').update(head).update(sum).digest();
    const parent = this.frames[this.frames.length - 1];
    this.sink = parent === undefined ? this.top : (parent.member as Hash);
    this.byte(0x7b);
    this.bytes(digest);
  }

  /** The output digest (`v2:` + hex); the value must be complete. */
  finish(): string {
    this.flush();
    return DIGEST_PREFIX + this.top.digest('hex');
  }

  private endMember(frame: ObjectFrame): void {
    if (frame.member === null) return;
    this.flush();
    const term = frame.member.digest();
    frame.member = null;
    // sum += term, big-endian words, modulo 2^256
    let carry = 0;
    for (let w = 7; w >= 0; w--) {
      const s = frame.sum[w] + term.readUInt32BE(w * 4) + carry;
      frame.sum[w] = s >>> 0;
      carry = s > 0xffffffff ? 1 : 0;
    }
  }

  private scalarUnit(u: number): void {
    if (u === 0x22 || u === 0x5c) {
      this.byte(0x5c);
      this.byte(u);
    } else if (u < 0x20) {
      this.ascii(`\\u00${HEX[u >> 4]}${HEX[u & 15]}`);
    } else if (u < 0x80) {
      this.byte(u);
    } else if (u < 0x800) {
      this.byte(0xc0 | (u >> 6));
      this.byte(0x80 | (u & 0x3f));
    } else {
      // Includes lone surrogates (WTF-8), which UTF-8 has no spelling for.
      this.byte(0xe0 | (u >> 12));
      this.byte(0x80 | ((u >> 6) & 0x3f));
      this.byte(0x80 | (u & 0x3f));
    }
  }

  private flushSurrogate(): void {
    if (this.pendingHigh === 0) return;
    const u = this.pendingHigh;
    this.pendingHigh = 0;
    this.scalarUnit(u);
  }

  private byte(b: number): void {
    if (this.used === SCRATCH_BYTES) this.flush();
    this.scratch[this.used++] = b;
  }

  private ascii(s: string): void {
    for (let i = 0; i < s.length; i++) this.byte(s.charCodeAt(i));
  }

  private bytes(b: Buffer): void {
    for (const x of b) this.byte(x);
  }

  private flush(): void {
    if (this.used === 0) return;
    this.sink.update(this.scratch.subarray(0, this.used));
    this.used = 0;
  }
}

/** Characters a JS string cannot be hashed as plain UTF-8 with: escaped ones, and surrogates. */
// eslint-disable-next-line no-control-regex
const NEEDS_UNITS = /["\\\u0000-\u001f\ud800-\udfff]/;

/**
 * The v2 digest of a parsed JSON value, walked without recursion (values may nest 10,000 deep).
 * Equal to the digest of the same value streamed, whatever its spelling.
 */
export function digestValue(keys: DigestKeys, value: unknown): string {
  const d = new ValueDigest(keys);
  // Work items: a value to emit, or a marker that closes a container.
  const CLOSE_ARRAY = Symbol('close-array');
  const CLOSE_OBJECT = Symbol('close-object');
  const work: unknown[] = [value];
  const keyOf = new Map<number, string>(); // work index → member key to emit first
  while (work.length > 0) {
    const at = work.length - 1;
    const v = work.pop();
    const key = keyOf.get(at);
    if (key !== undefined) {
      keyOf.delete(at);
      d.keyStart();
      d.text(key);
      d.stringEnd();
    }
    if (v === CLOSE_ARRAY) d.closeArray();
    else if (v === CLOSE_OBJECT) d.closeObject();
    else if (v === null || v === undefined) d.literal('n');
    else if (v === true) d.literal('t');
    else if (v === false) d.literal('f');
    else if (typeof v === 'number') d.numberValue(v);
    else if (typeof v === 'string') {
      d.stringStart();
      d.text(v);
      d.stringEnd();
    } else if (Array.isArray(v)) {
      d.openArray();
      work.push(CLOSE_ARRAY);
      for (let i = v.length - 1; i >= 0; i--) work.push(v[i]);
    } else if (typeof v === 'object') {
      d.openObject();
      work.push(CLOSE_OBJECT);
      const o = v as Record<string, unknown>;
      for (const k of Object.keys(o)) {
        keyOf.set(work.length, k);
        work.push(o[k]);
      }
    } else {
      d.literal('n'); // not a JSON value; JSON.stringify would write null
    }
  }
  return d.finish();
}

/** A keyed v2 digest of each output value (`{name: value}`). */
export function outputDigests(
  keys: DigestKeys,
  values: Record<string, unknown>,
): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name of Object.keys(values)) {
    Object.defineProperty(out, name, {
      value: digestValue(keys, values[name]),
      enumerable: true,
      writable: true,
      configurable: true,
    });
  }
  return out;
}

/** The values of a state's `outputs` (`{name: {value, type, sensitive}}` → `{name: value}`). */
export function outputValues(outputs: Record<string, unknown> | null): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const name of Object.keys(outputs ?? {})) {
    const o = (outputs as Record<string, unknown>)[name] as { value?: unknown } | null;
    Object.defineProperty(out, name, {
      value: o?.value,
      enumerable: true,
      writable: true,
      configurable: true,
    });
  }
  return out;
}

/** The names of a state's outputs marked `sensitive: true`, sorted. */
export function sensitiveNames(outputs: Record<string, unknown> | null): string[] {
  return Object.keys(outputs ?? {})
    .filter(
      (n) =>
        ((outputs as Record<string, unknown>)[n] as { sensitive?: unknown } | null)?.sensitive ===
        true,
    )
    .sort();
}

/**
 * One digest of a whole set of output digests (names and digests, in name order): versions are
 * indexed by it, so "the newest version whose outputs are the ones a consumer read" is one index
 * lookup however long the history is.
 */
export function outputSetDigest(digests: Record<string, string>): string {
  const h = createHash('sha256').update('statehouse output set v2\n');
  for (const name of Object.keys(digests).sort()) {
    h.update(JSON.stringify(name)).update(':').update(digests[name]).update('\n');
  }
  return DIGEST_PREFIX + h.digest('hex');
}

/** The same digests without the named ones (the outputs a reader without the sensitive right sees). */
export function withoutNames(
  digests: Record<string, string>,
  names: readonly string[],
): Record<string, string> {
  const drop = new Set(names);
  const out: Record<string, string> = {};
  for (const name of Object.keys(digests)) {
    if (drop.has(name)) continue;
    Object.defineProperty(out, name, {
      value: digests[name],
      enumerable: true,
      writable: true,
      configurable: true,
    });
  }
  return out;
}

/** What a version stores for the dependency graph about its outputs. */
export interface OutputFacts {
  output_digests: Record<string, string>;
  sensitive_outputs: string[];
  output_set_digest: string;
  public_output_set_digest: string;
}

/** Where the graph digest key is kept (shared by every replica; read by the digest migration). */
export const GRAPH_DIGEST_KEY_SETTING = 'graph_digest_key';

/**
 * Keyed digests of output values (scheme v2, above), stored with every version, so
 * the dependency graph can tell what changed without keeping or comparing values. The key is
 * generated once and shared by every replica through the database.
 */
@Injectable()
export class OutputDigester implements OnModuleInit {
  private digestKeys?: DigestKeys;

  constructor(private readonly secrets: SharedSecrets) {}

  /** A digester with a given key (tests wire services by hand). */
  static withKey(key: Buffer): OutputDigester {
    const d = new OutputDigester(undefined as unknown as SharedSecrets);
    d.digestKeys = digestKeys(key);
    return d;
  }

  async onModuleInit(): Promise<void> {
    if (this.digestKeys) return;
    const value = await this.secrets.getOrCreate(GRAPH_DIGEST_KEY_SETTING, () =>
      randomBytes(32).toString('base64url'),
    );
    this.digestKeys = digestKeys(Buffer.from(value, 'base64url'));
  }

  /** The keys, for inspectors that digest what remote-state data sources read while streaming. */
  get keys(): DigestKeys {
    if (!this.digestKeys) throw new Error('output digester is not initialised');
    return this.digestKeys;
  }

  /** Digests of a state's outputs (`{name: {value, …}}`). */
  digestOutputs(outputs: Record<string, unknown> | null): Record<string, string> {
    return this.digestValues(outputValues(outputs));
  }

  /** The digests of a state's outputs, which are sensitive, and the digests of both sets. */
  describeOutputs(outputs: Record<string, unknown> | null): OutputFacts {
    const digests = this.digestOutputs(outputs);
    const sensitive = sensitiveNames(outputs);
    return {
      output_digests: digests,
      sensitive_outputs: sensitive,
      output_set_digest: outputSetDigest(digests),
      public_output_set_digest: outputSetDigest(withoutNames(digests, sensitive)),
    };
  }

  /** Digests of plain values (`{name: value}`). */
  digestValues(values: Record<string, unknown>): Record<string, string> {
    return outputDigests(this.keys, values);
  }
}
