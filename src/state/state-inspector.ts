/**
 * Streaming inspector for state bodies (Terraform state v4 and OpenTofu encrypted envelopes).
 *
 * Pure and dependency-free (node built-ins only) so it can sit on the write path of states of
 * hundreds of MiB: the body is fed chunk by chunk, checked byte by byte by a JSON state machine
 * (RFC 8259 grammar, strict UTF-8) and never kept. Only small top-level values (`version`,
 * `serial`, `lineage`, `terraform_version`, `encryption_version`, the top-level key names),
 * the raw bytes of the top-level `outputs` value (bounded by `maxOutputsBytes`), and what the
 * remote-state scanner keeps of `terraform_remote_state` data sources (addresses and output
 * digests, under its own caps: remote-state-scanner.ts) are retained. Each element of
 * `resources` goes to that scanner as it streams by; none is buffered.
 *
 * Decisions worth knowing:
 * - Invalid UTF-8 inside strings (overlong forms, UTF-16 surrogates, code points past U+10FFFF,
 *   truncated or stray continuation bytes) is refused: RFC 8259 requires UTF-8, and a tolerant
 *   decoder would silently turn such bytes into U+FFFD.
 * - What Terraform cannot write and PostgreSQL cannot store is refused, and only that: an
 *   escaped UTF-16 surrogate that is not part of a pair (`"\ud800"`, which the JSON grammar
 *   allows) anywhere in the body — Go, which writes every state, has no such strings — and a
 *   NUL character in `lineage`, `terraform_version`, an output's name or a type name in its
 *   `type`. A NUL inside a value (`base64decode("AA==")` writes one), and so in the attribute
 *   names of an object type (its map keys), is accepted.
 * - A UTF-8 byte order mark is refused (RFC 8259 §8.1 says not to add one).
 * - Nesting deeper than 10000 levels is refused: Go's encoding/json (which Terraform and
 *   OpenTofu use to read state) stops at that depth, and it bounds this parser's memory.
 * - `version` and `serial` must be written as plain integers (`4`, not `4.0` or `4e0`):
 *   Terraform decodes them into Go unsigned integers and cannot read the other spellings.
 * - A body that has both a top-level `version` and an `encrypted_data`/`encryption_version`
 *   is refused: it is neither a Terraform state nor an OpenTofu envelope. Once the kind is known
 *   (`version` seen), Terraform rules are enforced at the byte that breaks them; a violation seen
 *   before that is held until the kind is known or the body ends.
 * - `terraform_version: null` is read as absent. `encryption_version` must be non-empty
 *   (OpenTofu treats an empty one as "not encrypted").
 * - Duplicate keys are refused at the top level only (compared after unescaping); deeper
 *   duplicates are left to JSON.parse's last-one-wins, as Go does.
 * - Small-value limits: each captured scalar at most 4 KiB, top-level key names at most 64 KiB
 *   in total. Error messages quote no state content beyond small numbers, one offending
 *   character and the names of the known top-level keys.
 */

import { digestKeys, DigestKeys } from './output-digests';
import { RemoteStateScanner, RemoteStateSource, StateLimitError } from './remote-state-scanner';

export type { RemoteStateSource } from './remote-state-scanner';
export { StateLimitError } from './remote-state-scanner';

export interface StateOutput {
  value: unknown;
  type?: unknown;
  sensitive?: boolean;
}

export type InspectedState =
  | {
      kind: 'terraform';
      version: 4;
      terraformVersion: string | null;
      serial: number;
      lineage: string;
      outputs: Record<string, StateOutput>;
      /** `terraform_remote_state` data sources: where this state read other states from. */
      remoteStates: RemoteStateSource[];
    }
  | { kind: 'encrypted'; encryptionVersion: string };

/** The body is not an acceptable state; the message says which rule it breaks. */
export class InvalidStateError extends Error {
  override readonly name = 'InvalidStateError';

  /** `limit`: the body may be a fine state, but it goes over one of this server's limits. */
  constructor(
    message: string,
    readonly limit = false,
  ) {
    super(message);
  }
}

/** Go's encoding/json refuses deeper documents; so do we. */
export const MAX_NESTING_DEPTH = 10000;
const DEFAULT_MAX_OUTPUTS_BYTES = 64 * 1024 * 1024;
/** Raw bytes (quotes and escapes included) kept for one top-level scalar. */
const MAX_SCALAR_BYTES = 4096;
/** Raw bytes of all top-level key names together. */
const MAX_TOP_KEYS_BYTES = 64 * 1024;
/** The digest key when none is given (tests): digests are then only comparable with each other. */
const NO_KEY = Buffer.alloc(32);

// Parser states.
const ST_ROOT = 0; // before the root value
const ST_VALUE = 1; // a value is expected
const ST_ARRAY_FIRST = 2; // after '[': a value or ']'
const ST_OBJ_FIRST = 3; // after '{': a key or '}'
const ST_KEY = 4; // after ',' in an object: a key
const ST_COLON = 5; // after a key
const ST_AFTER = 6; // after a value: ',' or the closing bracket
const ST_STR = 7; // inside a string
const ST_ESC = 8; // after a backslash
const ST_HEX = 9; // inside \uXXXX
const ST_UTF8 = 10; // expecting UTF-8 continuation bytes
const ST_NUM_MINUS = 11;
const ST_NUM_ZERO = 12;
const ST_NUM_INT = 13;
const ST_NUM_DOT = 14;
const ST_NUM_FRAC = 15;
const ST_NUM_E = 16;
const ST_NUM_ESIGN = 17;
const ST_NUM_EXP = 18;
const ST_LIT = 19; // inside true / false / null
const ST_DONE = 20; // after the root value
const ST_LOW_BACKSLASH = 21; // after a high-surrogate escape: the low one's backslash
const ST_LOW_U = 22; // after that backslash: its 'u'

const CT_OBJECT = 1;
const CT_ARRAY = 2;

// Value kinds, from a value's first byte.
const V_INVALID = 0;
const V_OBJECT = 1;
const V_ARRAY = 2;
const V_STRING = 3;
const V_NUMBER = 4;
const V_BOOLEAN = 5;
const V_NULL = 6;
const VALUE_NAMES = ['', 'an object', 'an array', 'a string', 'a number', 'a boolean', 'null'];

// Byte classes inside strings.
const SC_PLAIN = 0;
const SC_QUOTE = 1;
const SC_BACKSLASH = 2;
const SC_CONTROL = 3;
const SC_UTF8_LEAD = 4;
const SC_UTF8_BAD = 5;

const STR_CLASS = new Uint8Array(256);
const U8_NEED = new Uint8Array(256); // continuation bytes after a lead byte
const U8_LO = new Uint8Array(256); // allowed range of the first continuation byte
const U8_HI = new Uint8Array(256);
const IS_WS = new Uint8Array(256);
const IS_DIGIT = new Uint8Array(256);
const IS_HEX = new Uint8Array(256);
const VALUE_KIND = new Uint8Array(256);
const ESCAPABLE = new Uint8Array(256);

(function buildTables(): void {
  for (let c = 0; c < 256; c++) {
    if (c < 0x20) STR_CLASS[c] = SC_CONTROL;
    else if (c === 0x22) STR_CLASS[c] = SC_QUOTE;
    else if (c === 0x5c) STR_CLASS[c] = SC_BACKSLASH;
    else if (c < 0x80) STR_CLASS[c] = SC_PLAIN;
    else if (c >= 0xc2 && c <= 0xf4) STR_CLASS[c] = SC_UTF8_LEAD;
    else STR_CLASS[c] = SC_UTF8_BAD;
    U8_LO[c] = 0x80;
    U8_HI[c] = 0xbf;
    if (c >= 0xc2 && c <= 0xdf) U8_NEED[c] = 1;
    else if (c >= 0xe0 && c <= 0xef) U8_NEED[c] = 2;
    else if (c >= 0xf0 && c <= 0xf4) U8_NEED[c] = 3;
    if ((c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x46) || (c >= 0x61 && c <= 0x66)) {
      IS_HEX[c] = 1;
    }
  }
  U8_LO[0xe0] = 0xa0; // no overlong 3-byte forms
  U8_HI[0xed] = 0x9f; // no UTF-16 surrogates
  U8_LO[0xf0] = 0x90; // no overlong 4-byte forms
  U8_HI[0xf4] = 0x8f; // nothing past U+10FFFF
  for (const c of [0x20, 0x09, 0x0a, 0x0d]) IS_WS[c] = 1;
  for (let c = 0x30; c <= 0x39; c++) {
    IS_DIGIT[c] = 1;
    VALUE_KIND[c] = V_NUMBER;
  }
  VALUE_KIND[0x2d] = V_NUMBER;
  VALUE_KIND[0x7b] = V_OBJECT;
  VALUE_KIND[0x5b] = V_ARRAY;
  VALUE_KIND[0x22] = V_STRING;
  VALUE_KIND[0x74] = V_BOOLEAN;
  VALUE_KIND[0x66] = V_BOOLEAN;
  VALUE_KIND[0x6e] = V_NULL;
  for (const ch of '"\\/bfnrtu') ESCAPABLE[ch.charCodeAt(0)] = 1;
})();

const LIT_TRUE = Buffer.from('true');
const LIT_FALSE = Buffer.from('false');
const LIT_NULL = Buffer.from('null');

// Top-level keys we look at.
const K_OTHER = 0;
const K_VERSION = 1;
const K_SERIAL = 2;
const K_LINEAGE = 3;
const K_TERRAFORM_VERSION = 4;
const K_OUTPUTS = 5;
const K_ENCRYPTED_DATA = 6;
const K_ENCRYPTION_VERSION = 7;
const K_RESOURCES = 8;
const KNOWN_KEYS: Record<string, number> = {
  version: K_VERSION,
  serial: K_SERIAL,
  lineage: K_LINEAGE,
  terraform_version: K_TERRAFORM_VERSION,
  outputs: K_OUTPUTS,
  encrypted_data: K_ENCRYPTED_DATA,
  encryption_version: K_ENCRYPTION_VERSION,
  resources: K_RESOURCES,
};

// What the body turns out to be.
const KIND_UNKNOWN = 0;
const KIND_TERRAFORM = 1;
const KIND_ENCRYPTED = 2;

// What is being captured.
const CAP_NONE = 0;
const CAP_KEY = 1;
const CAP_VALUE = 2;

const INTEGER = /^(?:0|[1-9][0-9]*)$/;

const SPACES = 0x20202020;

/**
 * True when none of the four bytes of `w` ends a run of plain string content: no byte >= 0x80,
 * < 0x20, '"' or '\\'. (SWAR: a byte below the threshold borrows into its own high bit; false
 * positives only send the caller to the byte loop.)
 */
function isPlainWord(w: number): boolean {
  return (
    ((w | (w - 0x20202020) | ((w ^ 0x22222222) - 0x01010101) | ((w ^ 0x5c5c5c5c) - 0x01010101)) &
      0x80808080) ===
    0
  );
}

/** Index of the first non-whitespace byte at or after i, or n. */
function skipWhitespace(buf: Buffer, i: number, n: number, view: DataView | null): number {
  while (i < n) {
    const c = buf[i];
    if (c === 0x20) {
      i++;
      if (view !== null) while (i <= n - 4 && view.getInt32(i, true) === SPACES) i += 4;
    } else if (IS_WS[c] === 1) {
      i++;
    } else {
      return i;
    }
  }
  return n;
}

function describeByte(c: number): string {
  return c >= 0x21 && c <= 0x7e
    ? `"${String.fromCharCode(c)}"`
    : `byte 0x${c.toString(16).toUpperCase().padStart(2, '0')}`;
}

/** A number's text for a message, when it is short enough to be harmless. */
function shortNumber(text: string): string {
  return text.length <= 24 ? text : 'a long number';
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

const hasOwn = (o: object, k: string): boolean => Object.prototype.hasOwnProperty.call(o, k);

const nulIn = (what: string): string =>
  `state has a NUL character in ${what}, which Terraform cannot write and the server cannot store`;

/**
 * True when a type name inside an output's `type` holds a NUL. Member names do not count: they
 * are object attribute names, which Terraform takes from map keys (`{ "k\u0000" = 1 }` gives
 * `["object",{"k\u0000":"number"}]`); type names (`string`, `map`, …) never hold one.
 */
function typeNameHoldsNul(type: unknown): boolean {
  const pending = [type];
  while (pending.length > 0) {
    const v = pending.pop();
    if (typeof v === 'string') {
      if (v.includes('\u0000')) return true;
    } else if (typeof v === 'object' && v !== null) {
      pending.push(...(Object.values(v) as unknown[]));
    }
  }
  return false;
}

/**
 * Feed the body with write(), then call end(). Both throw InvalidStateError; write() throws as
 * soon as the bytes seen so far cannot be a valid state. After an error every call throws it again.
 */
export class StateInspector {
  private readonly maxOutputsBytes: number;

  // Parser.
  private state = ST_ROOT;
  private depth = 0;
  private readonly stack = new Uint8Array(MAX_NESTING_DEPTH + 1);
  private strIsKey = false;
  private hexLeft = 0;
  private hexValue = 0;
  private lowSurrogateDue = false; // the \uXXXX being read must be a low surrogate
  private u8Need = 0;
  private u8Lo = 0x80;
  private u8Hi = 0xbf;
  private lit: Buffer = LIT_NULL;
  private litPos = 0;
  private offset = 0; // bytes consumed before the current chunk
  private failure: InvalidStateError | null = null;
  private ended = false;

  // Capture of a top-level key or value.
  private capMode = CAP_NONE;
  private capStart = 0; // index in the current chunk
  private capParts: Buffer[] = [];
  private capLen = 0;
  private capLimit = 0;

  // Top level.
  private readonly topKeys = new Set<string>();
  private topKeysBytes = 0;
  private curKey = K_OTHER;
  private kind = KIND_UNKNOWN;
  private pending: string | null = null; // Terraform rule broken before the kind was known
  private hasVersion = false;
  private serial: number | null = null;
  private lineage: string | null = null;
  private terraformVersion: string | null = null;
  private outputs: Record<string, StateOutput> | null = null;
  private hasEncryptedData = false;

  // One element of the top-level "resources" array, streamed to the remote-state scanner.
  private elActive = false;
  private elStart = 0;
  private readonly scanner: RemoteStateScanner;
  private encryptionVersion: string | null = null;

  /**
   * `digestKey`: the server's graph digest key, for the v2 digests of what each
   * `terraform_remote_state` data source read (see output-digests.ts).
   */
  constructor(options?: { maxOutputsBytes?: number; digestKey?: Buffer | DigestKeys }) {
    const max = options?.maxOutputsBytes ?? DEFAULT_MAX_OUTPUTS_BYTES;
    if (!Number.isSafeInteger(max) || max < 0) {
      throw new RangeError('maxOutputsBytes must be a non-negative integer');
    }
    this.maxOutputsBytes = max;
    const key = options?.digestKey ?? NO_KEY;
    this.scanner = new RemoteStateScanner(Buffer.isBuffer(key) ? digestKeys(key) : key);
  }

  write(chunk: Buffer): void {
    if (this.failure !== null) throw this.failure;
    if (this.ended) throw new Error('StateInspector.write() called after end()');
    if (chunk.length === 0) return;
    try {
      this.run(chunk);
    } catch (err) {
      if (err instanceof StateLimitError) this.failure = new InvalidStateError(err.message, true);
      if (err instanceof InvalidStateError) this.failure = err;
      if (this.failure !== null) throw this.failure;
      throw err;
    }
    this.offset += chunk.length;
  }

  end(): InspectedState {
    if (this.failure !== null) throw this.failure;
    if (this.ended) throw new Error('StateInspector.end() called twice');
    try {
      const result = this.finish();
      this.ended = true;
      return result;
    } catch (err) {
      if (err instanceof InvalidStateError) this.failure = err;
      throw err;
    }
  }

  private finish(): InspectedState {
    if (this.state !== ST_DONE) {
      if (this.offset === 0) throw new InvalidStateError('body is empty');
      if (this.state === ST_ROOT) throw new InvalidStateError('body is empty (whitespace only)');
      throw new InvalidStateError(
        `body is not valid JSON (unexpected end of body at byte ${this.offset})`,
      );
    }
    if (this.kind === KIND_ENCRYPTED) {
      if (!this.hasEncryptedData) {
        throw new InvalidStateError(
          'encrypted state has "encryption_version" but no "encrypted_data"',
        );
      }
      if (this.encryptionVersion === null) {
        throw new InvalidStateError(
          'encrypted state has "encrypted_data" but no "encryption_version"',
        );
      }
      return { kind: 'encrypted', encryptionVersion: this.encryptionVersion };
    }
    if (this.pending !== null) throw new InvalidStateError(this.pending);
    if (!this.hasVersion) throw new InvalidStateError('state has no "version"');
    if (this.serial === null) throw new InvalidStateError('state has no "serial"');
    if (this.lineage === null) throw new InvalidStateError('state has no "lineage"');
    return {
      kind: 'terraform',
      version: 4,
      terraformVersion: this.terraformVersion,
      serial: this.serial,
      lineage: this.lineage,
      outputs: this.outputs ?? {},
      remoteStates: this.scanner.sources,
    };
  }

  // ---------------------------------------------------------------- byte-level state machine

  private run(buf: Buffer): void {
    const n = buf.length;
    const stack = this.stack;
    let state = this.state;
    let depth = this.depth;
    let strIsKey = this.strIsKey;
    let i = 0;
    let c = 0;
    // Word-at-a-time reads for the scans; not worth setting up for tiny chunks.
    const view = n >= 64 ? new DataView(buf.buffer, buf.byteOffset, n) : null;
    const n4 = n - 4;

    main: while (i < n) {
      switch (state) {
        case ST_STR: {
          // Hot path: runs of plain ASCII, four bytes at a time while the chunk allows.
          if (view !== null) {
            while (i <= n4 && isPlainWord(view.getInt32(i, true))) i += 4;
            if (i === n) break main;
          }
          c = buf[i];
          while (STR_CLASS[c] === SC_PLAIN) {
            if (++i === n) break main;
            c = buf[i];
          }
          const cls = STR_CLASS[c];
          if (cls === SC_QUOTE) {
            i++;
            if (strIsKey) {
              state = ST_COLON;
              if (depth === 1) this.topKeyEnd(buf, i);
            } else {
              state = ST_AFTER;
              if (depth === 1) this.topValueEnd(buf, i);
            }
          } else if (cls === SC_BACKSLASH) {
            i++;
            state = ST_ESC;
          } else if (cls === SC_UTF8_LEAD) {
            this.u8Need = U8_NEED[c];
            this.u8Lo = U8_LO[c];
            this.u8Hi = U8_HI[c];
            i++;
            state = ST_UTF8;
          } else if (cls === SC_CONTROL) {
            throw this.syntax(
              `unescaped control character ${describeByte(c)} in a string at byte ${this.offset + i}`,
            );
          } else {
            throw this.badUtf8(c, i);
          }
          break;
        }

        case ST_UTF8: {
          c = buf[i];
          if (c < this.u8Lo || c > this.u8Hi) throw this.badUtf8(c, i);
          i++;
          this.u8Lo = 0x80;
          this.u8Hi = 0xbf;
          if (--this.u8Need === 0) state = ST_STR;
          break;
        }

        case ST_ESC: {
          c = buf[i];
          if (ESCAPABLE[c] === 0) {
            throw this.syntax(`invalid escape ${describeByte(c)} at byte ${this.offset + i}`);
          }
          i++;
          if (c === 0x75) {
            this.hexLeft = 4;
            this.hexValue = 0;
            state = ST_HEX;
          } else {
            state = ST_STR;
          }
          break;
        }

        case ST_HEX: {
          c = buf[i];
          if (IS_HEX[c] === 0) {
            throw this.syntax(`invalid \\u escape (${describeByte(c)} at byte ${this.offset + i})`);
          }
          i++;
          this.hexValue = (this.hexValue << 4) | (c <= 0x39 ? c - 0x30 : (c | 0x20) - 0x57);
          if (--this.hexLeft === 0) state = this.escapedUnitEnd(i);
          break;
        }

        case ST_LOW_BACKSLASH: {
          c = buf[i];
          if (c !== 0x5c) throw this.loneSurrogate(i);
          i++;
          state = ST_LOW_U;
          break;
        }

        case ST_LOW_U: {
          c = buf[i];
          if (c !== 0x75) throw this.loneSurrogate(i);
          i++;
          this.hexLeft = 4;
          this.hexValue = 0;
          this.lowSurrogateDue = true;
          state = ST_HEX;
          break;
        }

        case ST_AFTER: {
          i = skipWhitespace(buf, i, n, view);
          if (i === n) break main;
          c = buf[i];
          i++;
          if (c === 0x2c) {
            state = stack[depth] === CT_OBJECT ? ST_KEY : ST_VALUE;
          } else if (
            (c === 0x7d && stack[depth] === CT_OBJECT) ||
            (c === 0x5d && stack[depth] === CT_ARRAY)
          ) {
            if (--depth === 0) {
              state = ST_DONE;
            } else if (depth === 1) {
              this.topValueEnd(buf, i);
            } else if (depth === 2 && this.elActive) {
              this.elementEnd(buf, i);
            }
          } else {
            throw this.unexpected(c, i - 1);
          }
          break;
        }

        case ST_KEY:
        case ST_OBJ_FIRST: {
          i = skipWhitespace(buf, i, n, view);
          if (i === n) break main;
          c = buf[i];
          if (c === 0x22) {
            if (depth === 1) this.topKeyStart(i);
            i++;
            strIsKey = true;
            state = ST_STR;
          } else if (c === 0x7d && state === ST_OBJ_FIRST) {
            i++;
            if (--depth === 0) {
              state = ST_DONE;
            } else {
              state = ST_AFTER;
              if (depth === 1) this.topValueEnd(buf, i);
              else if (depth === 2 && this.elActive) this.elementEnd(buf, i);
            }
          } else {
            throw this.unexpected(c, i);
          }
          break;
        }

        case ST_COLON: {
          i = skipWhitespace(buf, i, n, view);
          if (i === n) break main;
          c = buf[i];
          if (c !== 0x3a) throw this.unexpected(c, i);
          i++;
          state = ST_VALUE;
          break;
        }

        case ST_VALUE:
        case ST_ARRAY_FIRST: {
          i = skipWhitespace(buf, i, n, view);
          if (i === n) break main;
          c = buf[i];
          if (c === 0x5d && state === ST_ARRAY_FIRST) {
            i++;
            depth--; // an array is never the root, so depth stays >= 1
            state = ST_AFTER;
            if (depth === 1) this.topValueEnd(buf, i);
            break;
          }
          const kind = VALUE_KIND[c];
          if (kind === V_INVALID) throw this.unexpected(c, i);
          if (depth === 1) this.topValueStart(kind, i);
          else if (depth === 2 && kind === V_OBJECT && this.curKey === K_RESOURCES) {
            this.elementStart(i);
          }
          i++;
          switch (kind) {
            case V_STRING:
              strIsKey = false;
              state = ST_STR;
              break;
            case V_OBJECT:
            case V_ARRAY:
              if (depth === MAX_NESTING_DEPTH) throw this.tooDeep(i - 1);
              stack[++depth] = kind === V_OBJECT ? CT_OBJECT : CT_ARRAY;
              state = kind === V_OBJECT ? ST_OBJ_FIRST : ST_ARRAY_FIRST;
              break;
            case V_NUMBER:
              state = c === 0x2d ? ST_NUM_MINUS : c === 0x30 ? ST_NUM_ZERO : ST_NUM_INT;
              break;
            default:
              this.lit = c === 0x74 ? LIT_TRUE : c === 0x66 ? LIT_FALSE : LIT_NULL;
              this.litPos = 1;
              state = ST_LIT;
          }
          break;
        }

        case ST_NUM_INT:
        case ST_NUM_FRAC:
        case ST_NUM_EXP: {
          c = buf[i];
          while (IS_DIGIT[c] === 1) {
            if (++i === n) break main;
            c = buf[i];
          }
          if (state !== ST_NUM_EXP && (c === 0x65 || c === 0x45)) {
            i++;
            state = ST_NUM_E;
          } else if (state === ST_NUM_INT && c === 0x2e) {
            i++;
            state = ST_NUM_DOT;
          } else {
            // The number ends before this byte, which ST_AFTER then reads.
            state = ST_AFTER;
            if (depth === 1) this.topValueEnd(buf, i);
          }
          break;
        }

        case ST_NUM_ZERO: {
          c = buf[i];
          if (c === 0x2e) {
            i++;
            state = ST_NUM_DOT;
          } else if (c === 0x65 || c === 0x45) {
            i++;
            state = ST_NUM_E;
          } else {
            state = ST_AFTER;
            if (depth === 1) this.topValueEnd(buf, i);
          }
          break;
        }

        case ST_NUM_MINUS: {
          c = buf[i];
          if (IS_DIGIT[c] === 0) throw this.unexpected(c, i);
          i++;
          state = c === 0x30 ? ST_NUM_ZERO : ST_NUM_INT;
          break;
        }

        case ST_NUM_DOT: {
          c = buf[i];
          if (IS_DIGIT[c] === 0) throw this.unexpected(c, i);
          i++;
          state = ST_NUM_FRAC;
          break;
        }

        case ST_NUM_E: {
          c = buf[i];
          if (c === 0x2b || c === 0x2d) {
            i++;
            state = ST_NUM_ESIGN;
          } else if (IS_DIGIT[c] === 1) {
            i++;
            state = ST_NUM_EXP;
          } else {
            throw this.unexpected(c, i);
          }
          break;
        }

        case ST_NUM_ESIGN: {
          c = buf[i];
          if (IS_DIGIT[c] === 0) throw this.unexpected(c, i);
          i++;
          state = ST_NUM_EXP;
          break;
        }

        case ST_LIT: {
          c = buf[i];
          const lit = this.lit;
          if (c !== lit[this.litPos]) throw this.unexpected(c, i);
          i++;
          if (++this.litPos === lit.length) {
            if (depth === 0) {
              throw new InvalidStateError(
                `state must be a JSON object (got ${lit === LIT_NULL ? 'null' : 'a boolean'})`,
              );
            }
            state = ST_AFTER;
            if (depth === 1) this.topValueEnd(buf, i);
          }
          break;
        }

        case ST_ROOT: {
          i = skipWhitespace(buf, i, n, view);
          if (i === n) break main;
          c = buf[i];
          if (c === 0x7b) {
            i++;
            depth = 1;
            stack[1] = CT_OBJECT;
            state = ST_OBJ_FIRST;
            break;
          }
          if (c === 0xef && this.offset + i === 0) {
            throw new InvalidStateError(
              'body starts with a UTF-8 byte order mark, which JSON forbids',
            );
          }
          const kind = VALUE_KIND[c];
          // A literal's first letter does not make it a literal ("not json" starts like null):
          // read it to its end first, so the message says what is really wrong.
          if (kind === V_BOOLEAN || kind === V_NULL) {
            this.lit = c === 0x74 ? LIT_TRUE : c === 0x66 ? LIT_FALSE : LIT_NULL;
            this.litPos = 1;
            i++;
            state = ST_LIT;
            break;
          }
          if (kind !== V_INVALID) {
            throw new InvalidStateError(`state must be a JSON object (got ${VALUE_NAMES[kind]})`);
          }
          throw this.unexpected(c, i);
        }

        case ST_DONE: {
          i = skipWhitespace(buf, i, n, view);
          if (i === n) break main;
          c = buf[i];
          throw this.syntax(
            `unexpected ${describeByte(c)} at byte ${this.offset + i}, after the end of the object`,
          );
        }

        default:
          throw new Error(`StateInspector: unknown parser state ${state}`);
      }
    }

    this.state = state;
    this.depth = depth;
    this.strIsKey = strIsKey;
    if (this.capMode !== CAP_NONE) this.carryCapture(buf);
    if (this.elActive) this.carryElement(buf);
  }

  // ---------------------------------------------------------------- remote-state data sources

  private elementStart(i: number): void {
    this.elActive = true;
    this.elStart = i;
    this.scanner.beginElement();
  }

  /** End of a chunk inside a resource: its bytes so far (validated) go to the scanner. */
  private carryElement(buf: Buffer): void {
    this.scanner.feed(buf, this.elStart, buf.length);
    this.elStart = 0;
  }

  /** A resource ended: the scanner keeps it when it is a `terraform_remote_state` data source. */
  private elementEnd(buf: Buffer, end: number): void {
    this.elActive = false;
    this.scanner.feed(buf, this.elStart, end);
    this.scanner.endElement();
  }

  /**
   * A `\uXXXX` escape ended (at i): the next parser state. A high surrogate must be followed
   * at once by an escaped low one; a low one must follow a high one.
   */
  private escapedUnitEnd(i: number): number {
    const unit = this.hexValue;
    const isLow = unit >= 0xdc00 && unit <= 0xdfff;
    if (this.lowSurrogateDue) {
      this.lowSurrogateDue = false;
      if (!isLow) throw this.loneSurrogate(i - 6);
      return ST_STR;
    }
    if (isLow) throw this.loneSurrogate(i - 6);
    return unit >= 0xd800 && unit <= 0xdbff ? ST_LOW_BACKSLASH : ST_STR;
  }

  private loneSurrogate(i: number): InvalidStateError {
    return new InvalidStateError(
      `state holds an unpaired UTF-16 surrogate escape (near byte ${this.offset + i}), which Terraform cannot write and the server cannot store`,
    );
  }

  private syntax(detail: string): InvalidStateError {
    return new InvalidStateError(`body is not valid JSON (${detail})`);
  }

  private unexpected(c: number, i: number): InvalidStateError {
    return this.syntax(`unexpected ${describeByte(c)} at byte ${this.offset + i}`);
  }

  private badUtf8(c: number, i: number): InvalidStateError {
    return new InvalidStateError(
      `body is not valid UTF-8 (${describeByte(c)} at byte ${this.offset + i} in a string)`,
    );
  }

  private tooDeep(i: number): InvalidStateError {
    return new InvalidStateError(
      `body nests arrays and objects deeper than ${MAX_NESTING_DEPTH} levels (at byte ${this.offset + i})`,
    );
  }

  // ---------------------------------------------------------------- capture of top-level bytes

  private startCapture(mode: number, start: number, limit: number): void {
    this.capMode = mode;
    this.capStart = start;
    this.capLen = 0;
    this.capLimit = limit;
  }

  /** End of a chunk in the middle of a capture: keep a copy of the tail (the caller may reuse it). */
  private carryCapture(buf: Buffer): void {
    const add = buf.length - this.capStart;
    if (this.capLen + add > this.capLimit) {
      this.captureOverflow();
      return;
    }
    if (add > 0) this.capParts.push(Buffer.from(buf.subarray(this.capStart)));
    this.capLen += add;
    this.capStart = 0;
  }

  /** The captured bytes, or null when they went over the limit. */
  private finishCapture(buf: Buffer, end: number): Buffer | null {
    const add = end - this.capStart;
    const total = this.capLen + add;
    if (total > this.capLimit) {
      this.captureOverflow();
      return null;
    }
    const tail = buf.subarray(this.capStart, end);
    const raw = this.capParts.length === 0 ? tail : Buffer.concat([...this.capParts, tail], total);
    this.capMode = CAP_NONE;
    this.capParts = [];
    return raw;
  }

  private captureOverflow(): void {
    const mode = this.capMode;
    this.capMode = CAP_NONE;
    this.capParts = [];
    if (mode === CAP_KEY) {
      throw new InvalidStateError(
        `state top-level key names are too long (over ${MAX_TOP_KEYS_BYTES} bytes in total)`,
      );
    }
    switch (this.curKey) {
      case K_OUTPUTS:
        this.violation(`state "outputs" is larger than the ${this.maxOutputsBytes}-byte limit`);
        return;
      case K_ENCRYPTION_VERSION:
        throw new InvalidStateError(`encrypted state "encryption_version" is too long`);
      default:
        this.violation(`state "${this.keyName()}" is too long`);
    }
  }

  // ---------------------------------------------------------------- top-level rules

  private keyName(): string {
    for (const [name, id] of Object.entries(KNOWN_KEYS)) if (id === this.curKey) return name;
    return '?';
  }

  /** A Terraform rule is broken: fatal for a Terraform state, irrelevant for an encrypted one. */
  private violation(message: string): void {
    if (this.kind === KIND_TERRAFORM) throw new InvalidStateError(message);
    if (this.kind === KIND_UNKNOWN && this.pending === null) this.pending = message;
  }

  private setKind(kind: number): void {
    if (this.kind === kind) return;
    if (this.kind !== KIND_UNKNOWN) {
      throw new InvalidStateError(
        'body mixes a Terraform state "version" with an OpenTofu encryption envelope',
      );
    }
    this.kind = kind;
    if (kind === KIND_TERRAFORM) {
      if (this.pending !== null) throw new InvalidStateError(this.pending);
    } else {
      this.pending = null;
      this.outputs = null;
    }
  }

  private topKeyStart(i: number): void {
    this.startCapture(CAP_KEY, i, MAX_TOP_KEYS_BYTES - this.topKeysBytes);
  }

  private topKeyEnd(buf: Buffer, end: number): void {
    const raw = this.finishCapture(buf, end);
    if (raw === null) return; // unreachable: key overflow throws
    this.topKeysBytes += raw.length;
    const key = JSON.parse(raw.toString('utf8')) as string;
    const id = hasOwn(KNOWN_KEYS, key) ? KNOWN_KEYS[key] : K_OTHER;
    if (this.topKeys.has(key)) {
      throw new InvalidStateError(
        id === K_OTHER
          ? 'state has a duplicate top-level key'
          : `state has the top-level key "${key}" more than once`,
      );
    }
    this.topKeys.add(key);
    this.curKey = id;
    if (id === K_VERSION) {
      this.setKind(KIND_TERRAFORM);
      this.hasVersion = true;
    } else if (id === K_ENCRYPTED_DATA || id === K_ENCRYPTION_VERSION) {
      this.setKind(KIND_ENCRYPTED);
    }
  }

  private topValueStart(kind: number, i: number): void {
    const key = this.curKey;
    if (key === K_OTHER) return;
    const got = VALUE_NAMES[kind];
    if (key === K_ENCRYPTED_DATA) {
      if (kind !== V_STRING) {
        throw new InvalidStateError(
          `encrypted state "encrypted_data" must be a string (got ${got})`,
        );
      }
      this.hasEncryptedData = true;
      return;
    }
    if (key === K_ENCRYPTION_VERSION) {
      if (kind !== V_STRING) {
        throw new InvalidStateError(
          `encrypted state "encryption_version" must be a string (got ${got})`,
        );
      }
      this.startCapture(CAP_VALUE, i, MAX_SCALAR_BYTES);
      return;
    }
    if (this.kind === KIND_ENCRYPTED) return; // Terraform fields mean nothing in an envelope
    switch (key) {
      case K_VERSION:
        if (kind === V_NUMBER) this.startCapture(CAP_VALUE, i, MAX_SCALAR_BYTES);
        else this.violation(`state "version" must be 4 (got ${got})`);
        return;
      case K_SERIAL:
        if (kind === V_NUMBER) this.startCapture(CAP_VALUE, i, MAX_SCALAR_BYTES);
        else this.violation(`state "serial" must be a non-negative integer (got ${got})`);
        return;
      case K_LINEAGE:
        if (kind === V_STRING) this.startCapture(CAP_VALUE, i, MAX_SCALAR_BYTES);
        else this.violation(`state "lineage" must be a non-empty string (got ${got})`);
        return;
      case K_TERRAFORM_VERSION:
        if (kind === V_STRING) this.startCapture(CAP_VALUE, i, MAX_SCALAR_BYTES);
        else if (kind !== V_NULL) {
          this.violation(`state "terraform_version" must be a string (got ${got})`);
        }
        return;
      case K_OUTPUTS:
        if (kind === V_OBJECT) this.startCapture(CAP_VALUE, i, this.maxOutputsBytes);
        else this.violation(`state "outputs" must be an object (got ${got})`);
        return;
      default:
        return;
    }
  }

  private topValueEnd(buf: Buffer, end: number): void {
    if (this.capMode !== CAP_VALUE) return;
    const raw = this.finishCapture(buf, end);
    if (raw === null) return;
    const text = raw.toString('utf8');
    switch (this.curKey) {
      case K_VERSION:
        if (text !== '4') this.violation(`state "version" must be 4 (got ${shortNumber(text)})`);
        return;
      case K_SERIAL: {
        const serial = Number(text);
        if (INTEGER.test(text) && Number.isSafeInteger(serial)) this.serial = serial;
        else
          this.violation(
            `state "serial" must be a non-negative integer (got ${shortNumber(text)})`,
          );
        return;
      }
      case K_LINEAGE: {
        const lineage = JSON.parse(text) as string;
        if (lineage === '') this.violation('state "lineage" must be a non-empty string (got "")');
        else if (lineage.includes('\u0000')) this.violation(nulIn('"lineage"'));
        else this.lineage = lineage;
        return;
      }
      case K_TERRAFORM_VERSION: {
        const version = JSON.parse(text) as string;
        if (version.includes('\u0000')) this.violation(nulIn('"terraform_version"'));
        else this.terraformVersion = version;
        return;
      }
      case K_OUTPUTS:
        this.readOutputs(text);
        return;
      case K_ENCRYPTION_VERSION: {
        const version = JSON.parse(text) as string;
        if (version === '') {
          throw new InvalidStateError('encrypted state "encryption_version" must not be empty');
        }
        this.encryptionVersion = version;
        return;
      }
      default:
        return;
    }
  }

  private readOutputs(text: string): void {
    const parsed = JSON.parse(text) as Record<string, unknown>; // an object, checked at its start
    const outputs: Record<string, StateOutput> = {};
    for (const name of Object.keys(parsed)) {
      if (name.includes('\u0000')) {
        this.violation(nulIn('an output name'));
        return;
      }
      const member = parsed[name];
      if (!isPlainObject(member)) {
        this.violation('state "outputs" has a member that is not an object');
        return;
      }
      if (!hasOwn(member, 'value')) {
        this.violation('state "outputs" has a member with no "value"');
        return;
      }
      const output: StateOutput = { value: member.value };
      if (hasOwn(member, 'type')) {
        if (typeNameHoldsNul(member.type)) {
          this.violation(nulIn('a type name of an output\'s "type"'));
          return;
        }
        output.type = member.type;
      }
      if (hasOwn(member, 'sensitive')) {
        if (typeof member.sensitive !== 'boolean') {
          this.violation('state "outputs" has a member whose "sensitive" is not a boolean');
          return;
        }
        output.sensitive = member.sensitive;
      }
      // defineProperty, so that an output named "__proto__" stays an ordinary member.
      Object.defineProperty(outputs, name, {
        value: output,
        enumerable: true,
        writable: true,
        configurable: true,
      });
    }
    this.outputs = outputs;
  }
}
