import { createHash, Hash } from 'node:crypto';
import { DigestKeys, ValueDigest } from './output-digests';

/**
 * Finds `terraform_remote_state` data sources in the elements of a state's `resources` array
 * while they stream by, keeping only what the dependency graph needs: the data source's name,
 * backend and workspace, the few config keys that address a backend (`address`; `bucket`,
 * `key`, `endpoint`, `endpoints.s3`, `workspace_key_prefix`; `hostname`, `organization`,
 * `workspaces.name`, `workspaces.prefix`), and a v2 digest of each output it
 * read — never the config's other values (credentials) nor the outputs themselves. Memory is
 * bounded whatever the state's shape: nothing is buffered but those small values, each capped,
 * under one budget for the whole state.
 *
 * Pure (node built-ins only). Fed with bytes the state inspector has already validated as JSON,
 * so it does not check the grammar again; one resource element at a time (`beginElement`,
 * `feed`, `endElement`). A resource whose `mode` or `type` shows it is something else (Terraform
 * writes them first) costs nothing more.
 */

/** A `terraform_remote_state` data source recorded in a state. */
export interface RemoteStateSource {
  /** The data source's name (`data.terraform_remote_state.<name>`), with its instance key. */
  name: string;
  backend: string;
  /**
   * The address part of its config only (string values of the keys above, `endpoints` as
   * `{s3}`). Empty when one of them is longer than any address of this server can be.
   */
  config: Record<string, unknown>;
  workspace: string | null;
  /** The v2 digest of each output as the consumer read it (`{name: digest}`). */
  outputs: Record<string, string>;
}

/** A state goes over one of the limits below: refused (400), naming the limit. */
export class StateLimitError extends Error {
  override readonly name = 'StateLimitError';
}

/** Data source instances kept per state; a state with more is refused. */
export const MAX_REMOTE_STATES = 1000;
/** Bytes kept for all data sources of a state (names, addresses, output names and digests). */
export const MAX_REMOTE_STATE_BYTES = 16 * 1024 * 1024;
/** Raw bytes of one kept value (a name, an instance key, an address, an output name). */
export const MAX_REMOTE_VALUE_BYTES = 16 * 1024;
/** What one output costs besides its name: its digest and bookkeeping. */
const PER_OUTPUT_BYTES = 128;
const KEY_MATCH_BYTES = 64;
const LONG_NUMBER = 1024;

// Tokens.
const TK_NONE = 0;
const TK_STR = 1;
const TK_ESC = 2;
const TK_HEX = 3;
const TK_NUM = 4;
const TK_LIT = 5;

// What a string is read for.
const S_SKIP = 0;
const S_CAPTURE = 1;
const S_DIGEST = 2;

// Roles of containers (and of the values their members hold).
const R_SKIP = 0;
const R_RESOURCE = 1;
const R_INSTANCES = 2;
const R_INSTANCE = 3;
const R_ATTRS = 4;
const R_CONFIG_WRAP = 5;
const R_CONFIG = 6;
const R_ENDPOINTS = 7;
const R_OUTPUTS_WRAP = 8;
const R_OUTPUTS = 9;
const R_DIGEST = 10; // a container inside a digested output value
const R_WORKSPACES = 11; // `workspaces` of a `remote` backend's config
// Roles of scalars.
const V_MODE = 20;
const V_TYPE = 21;
const V_NAME = 22;
const V_INDEX_KEY = 23;
const V_BACKEND = 24;
const V_WORKSPACE = 25;
const V_CONFIG = 26; // one of CONFIG_KEYS
const V_ENDPOINT_S3 = 27;
const V_OUTPUT = 28;
const V_OUTPUT_NAME = 29; // a key of R_OUTPUTS
const V_KEY = 30; // a key being matched
const V_WORKSPACES_FIELD = 31; // `workspaces.name` / `workspaces.prefix`

const MEMBER_ROLES: Record<number, Record<string, number>> = {
  [R_RESOURCE]: { mode: V_MODE, type: V_TYPE, name: V_NAME, instances: R_INSTANCES },
  [R_INSTANCE]: { index_key: V_INDEX_KEY, attributes: R_ATTRS },
  [R_ATTRS]: {
    backend: V_BACKEND,
    workspace: V_WORKSPACE,
    config: R_CONFIG_WRAP,
    outputs: R_OUTPUTS_WRAP,
  },
  [R_CONFIG_WRAP]: { value: R_CONFIG },
  [R_OUTPUTS_WRAP]: { value: R_OUTPUTS },
  [R_CONFIG]: {
    address: V_CONFIG,
    bucket: V_CONFIG,
    key: V_CONFIG,
    endpoint: V_CONFIG,
    workspace_key_prefix: V_CONFIG,
    hostname: V_CONFIG,
    organization: V_CONFIG,
    endpoints: R_ENDPOINTS,
    workspaces: R_WORKSPACES,
  },
  [R_ENDPOINTS]: { s3: V_ENDPOINT_S3 },
  [R_WORKSPACES]: { name: V_WORKSPACES_FIELD, prefix: V_WORKSPACES_FIELD },
};
const OBJECT_ROLES = new Set([
  R_RESOURCE,
  R_INSTANCE,
  R_ATTRS,
  R_CONFIG_WRAP,
  R_CONFIG,
  R_ENDPOINTS,
  R_WORKSPACES,
  R_OUTPUTS_WRAP,
  R_OUTPUTS,
]);

const IS_WS = new Uint8Array(256);
for (const c of [0x20, 0x09, 0x0a, 0x0d]) IS_WS[c] = 1;
/** Bytes that end a run of plain string content. */
const STR_STOP = new Uint8Array(256);
for (let c = 0; c < 0x20; c++) STR_STOP[c] = 1;
STR_STOP[0x22] = 1;
STR_STOP[0x5c] = 1;
/** Bytes that matter while skipping a container: brackets and quotes. */
const SKIP_STOP = new Uint8Array(256);
for (const ch of '"{}[]') SKIP_STOP[ch.charCodeAt(0)] = 1;
const IS_NUM = new Uint8Array(256);
for (const ch of '0123456789+-.eE') IS_NUM[ch.charCodeAt(0)] = 1;
const IS_LETTER = new Uint8Array(256);
for (let c = 0x61; c <= 0x7a; c++) IS_LETTER[c] = 1;
const SIMPLE_ESCAPES: Record<number, number> = {
  0x22: 0x22,
  0x5c: 0x5c,
  0x2f: 0x2f,
  0x62: 0x08,
  0x66: 0x0c,
  0x6e: 0x0a,
  0x72: 0x0d,
  0x74: 0x09,
};

interface PendingInstance {
  /** `JSON.stringify` of the instance's `index_key`, when it has one. */
  indexKey: string | undefined;
  hasAttributes: boolean;
  backend: string;
  workspace: string | null;
  config: Record<string, unknown>;
  outputs: Record<string, string>;
  /** An address value went over the cap: it cannot name a state here. */
  unresolvable: boolean;
}

const hexValue = (c: number): number =>
  c <= 0x39 ? c - 0x30 : c <= 0x46 ? c - 0x41 + 10 : c - 0x61 + 10;

function setMember(o: Record<string, unknown>, name: string, value: unknown): void {
  // defineProperty, so that a name like "__proto__" stays an ordinary member.
  Object.defineProperty(o, name, { value, enumerable: true, writable: true, configurable: true });
}

export class RemoteStateScanner {
  /** Every data source found so far, in document order. */
  readonly sources: RemoteStateSource[] = [];
  private readonly keys: DigestKeys;
  private retained = 0; // bytes charged by kept sources

  // The element (one resource) being read.
  private ignored = false; // known not to be a remote state: the rest is not looked at
  private modeOk = false;
  private typeOk = false;
  private baseName: string | null = null;
  private instances: PendingInstance[] = [];
  private inst: PendingInstance | null = null;
  private elRetained = 0;
  private overflow: string | null = null; // a limit broken before the type was known

  // Tokenizer (over valid JSON).
  private depth = 0;
  private readonly roles: number[] = [];
  private readonly isObject: boolean[] = [];
  private readonly memberRole: number[] = []; // role of the value of the current key, per depth
  private expectKey = false;
  private lastKey = ''; // the last key matched, for the config value that follows it
  private tok = TK_NONE;
  private strMode = S_SKIP;
  private strIsKey = false;
  private hexLeft = 0;
  private hexUnit = 0;
  private litFirst = 0;
  private skipDepth = 0; // > 0 inside a container that is not looked at
  private skipInString = false;
  private skipEscape = false;

  // Capture of a small value (raw JSON text), for `capRole`.
  private capRole = R_SKIP;
  private capParts: Buffer[] = [];
  private readonly capSmall = Buffer.allocUnsafe(KEY_MATCH_BYTES); // short captures: no allocation
  private capEscaped = false;
  private capLen = 0;
  private capLimit = 0;
  private capOver = false;
  private capCharged = false;
  private capIsString = false;

  // Digest of one output value.
  private digest: ValueDigest | null = null;
  private digestBase = 0; // depth of the R_OUTPUTS object holding it
  private outputName = '';
  private numText = '';
  private numHash: Hash | null = null;

  constructor(keys: DigestKeys) {
    this.keys = keys;
  }

  beginElement(): void {
    this.ignored = false;
    this.modeOk = false;
    this.typeOk = false;
    this.baseName = null;
    this.instances = [];
    this.inst = null;
    this.elRetained = 0;
    this.overflow = null;
    this.depth = 0;
    this.roles.length = 0;
    this.isObject.length = 0;
    this.memberRole.length = 0;
    this.expectKey = false;
    this.tok = TK_NONE;
    this.skipDepth = 0;
    this.skipInString = false;
    this.skipEscape = false;
    this.capRole = R_SKIP;
    this.capParts = [];
    this.digest = null;
  }

  /** The element is complete: keep its instances when it is a `terraform_remote_state` data source. */
  endElement(): void {
    const remote = this.modeOk && this.typeOk && !this.ignored;
    if (remote && this.overflow !== null) throw new StateLimitError(this.overflow);
    if (remote) {
      const base = this.baseName ?? '?';
      for (const inst of this.instances) {
        this.sources.push({
          name: inst.indexKey === undefined ? base : `${base}[${inst.indexKey}]`,
          backend: inst.backend,
          config: inst.unresolvable ? {} : inst.config,
          workspace: inst.workspace,
          outputs: inst.outputs,
        });
      }
      this.retained += this.elRetained;
    }
    this.instances = [];
    this.inst = null;
    this.elRetained = 0;
    this.digest = null;
    this.capParts = [];
  }

  feed(buf: Buffer, start: number, end: number): void {
    let i = start;
    while (i < end && !this.ignored) {
      if (this.skipDepth > 0 && this.tok === TK_NONE) {
        i = this.skip(buf, i, end);
        continue;
      }
      switch (this.tok) {
        case TK_STR:
          i = this.stringContent(buf, i, end);
          break;
        case TK_ESC:
          i = this.escape(buf, i);
          break;
        case TK_HEX:
          i = this.hex(buf, i);
          break;
        case TK_NUM:
          i = this.numberContent(buf, i, end);
          break;
        case TK_LIT:
          while (i < end && IS_LETTER[buf[i]] === 1) i++;
          if (i < end) this.literalEnd();
          break;
        default:
          i = this.structural(buf, i);
      }
    }
  }

  // ---------------------------------------------------------------- structure

  private structural(buf: Buffer, i: number): number {
    const c = buf[i];
    if (IS_WS[c] === 1 || c === 0x3a) return i + 1;
    if (c === 0x2c) {
      if (this.isObject[this.depth]) this.expectKey = true;
      return i + 1;
    }
    if (c === 0x7d || c === 0x5d) {
      this.close(c === 0x7d);
      return i + 1;
    }
    if (c === 0x22 && this.depth > 0 && this.isObject[this.depth] && this.expectKey) {
      this.expectKey = false;
      this.keyStart();
      this.tok = TK_STR;
      return i + 1;
    }
    // A value.
    const role = this.valueRole();
    if (c === 0x7b || c === 0x5b) {
      this.open(c === 0x7b, role);
      return i + 1;
    }
    if (c === 0x22) {
      this.strIsKey = false;
      this.valueStringStart(role);
      this.tok = TK_STR;
      return i + 1;
    }
    if (IS_NUM[c] === 1) {
      this.scalarStart(role);
      this.tok = TK_NUM;
      return i;
    }
    this.scalarStart(role);
    this.litFirst = c;
    this.tok = TK_LIT;
    return i;
  }

  /** The role of the value starting now, from its container and the key before it. */
  private valueRole(): number {
    if (this.depth === 0) return R_RESOURCE;
    const container = this.roles[this.depth];
    if (container === R_DIGEST) return this.digest === null ? R_SKIP : R_DIGEST;
    const role = this.isObject[this.depth]
      ? this.memberRole[this.depth]
      : container === R_INSTANCES
        ? R_INSTANCE
        : R_SKIP;
    if (this.overflow !== null && role !== V_MODE && role !== V_TYPE && role !== R_RESOURCE) {
      return R_SKIP; // over a limit: only whether it is a remote state still matters
    }
    return role;
  }

  private open(object: boolean, role: number): void {
    if (role === V_OUTPUT) this.startDigest();
    if (role === R_DIGEST || role === V_OUTPUT) {
      const d = this.digest as ValueDigest;
      if (object) d.openObject();
      else d.openArray();
      this.push(object, R_DIGEST);
      return;
    }
    const fits = object ? OBJECT_ROLES.has(role) : role === R_INSTANCES;
    if (!fits) {
      this.skipDepth = 1;
      this.skipInString = false;
      this.skipEscape = false;
      return;
    }
    if (role === R_INSTANCE) {
      this.inst = {
        indexKey: undefined,
        hasAttributes: false,
        backend: '',
        workspace: null,
        config: {},
        outputs: {},
        unresolvable: false,
      };
    } else if (role === R_ATTRS && this.inst) {
      this.inst.hasAttributes = true;
    }
    this.push(object, role);
  }

  private push(object: boolean, role: number): void {
    this.depth++;
    this.roles[this.depth] = role;
    this.isObject[this.depth] = object;
    this.memberRole[this.depth] = R_SKIP;
    this.expectKey = object;
  }

  private close(object: boolean): void {
    const role = this.roles[this.depth];
    this.depth--;
    this.expectKey = false;
    if (role === R_DIGEST) {
      const d = this.digest;
      if (d !== null) {
        if (object) d.closeObject();
        else d.closeArray();
      }
      this.valueEnd();
      return;
    }
    if (role === R_INSTANCE && this.inst !== null) {
      const inst = this.inst;
      this.inst = null;
      if (inst.hasAttributes) {
        if (this.sources.length + this.instances.length >= MAX_REMOTE_STATES) {
          this.limit(
            `state has more than ${MAX_REMOTE_STATES} terraform_remote_state data source instances (the limit per state)`,
          );
        } else {
          this.instances.push(inst);
        }
      }
    }
  }

  /** A value (scalar or container) at the current depth just ended. */
  private valueEnd(): void {
    if (this.digest !== null && this.depth === this.digestBase) {
      const digest = this.digest.finish();
      this.digest = null;
      if (this.inst !== null && this.overflow === null)
        setMember(this.inst.outputs, this.outputName, digest);
    }
  }

  // ---------------------------------------------------------------- keys and scalars

  private keyStart(): void {
    const container = this.roles[this.depth];
    this.strIsKey = true;
    this.memberRole[this.depth] = R_SKIP;
    if (container === R_DIGEST) {
      if (this.digest !== null) {
        this.digest.keyStart();
        this.strMode = S_DIGEST;
      } else {
        this.strMode = S_SKIP;
      }
      return;
    }
    if (this.overflow !== null && container !== R_RESOURCE) {
      this.strMode = S_SKIP; // over a limit: only the resource's mode and type still matter
      return;
    }
    if (container === R_OUTPUTS) {
      this.beginCapture(V_OUTPUT_NAME, MAX_REMOTE_VALUE_BYTES, true);
      this.capIsString = true;
      return;
    }
    if (MEMBER_ROLES[container] !== undefined) {
      this.beginCapture(V_KEY, KEY_MATCH_BYTES, false);
      this.capIsString = true;
      return;
    }
    this.strMode = S_SKIP;
  }

  private valueStringStart(role: number): void {
    if (role === V_OUTPUT || role === R_DIGEST) {
      if (role === V_OUTPUT) this.startDigest();
      (this.digest as ValueDigest).stringStart();
      this.strMode = S_DIGEST;
      return;
    }
    if (!this.beginValueCapture(role)) {
      this.strMode = S_SKIP;
      this.noValue(role);
      return;
    }
    this.capIsString = true;
  }

  /** A number or literal starts. */
  private scalarStart(role: number): void {
    this.numText = '';
    this.numHash = null;
    if (role === V_OUTPUT) this.startDigest();
    if (role === V_OUTPUT || role === R_DIGEST) {
      this.strMode = S_DIGEST;
      return;
    }
    if (role === V_INDEX_KEY && this.beginValueCapture(role)) {
      this.capIsString = false;
      return;
    }
    this.strMode = S_SKIP;
    this.noValue(role);
  }

  /** Starts capturing a scalar of `role`; false when that role keeps nothing. */
  private beginValueCapture(role: number): boolean {
    switch (role) {
      case V_MODE:
      case V_TYPE:
        this.beginCapture(role, KEY_MATCH_BYTES, false);
        return true;
      case V_NAME:
      case V_INDEX_KEY:
      case V_BACKEND:
      case V_WORKSPACE:
      case V_CONFIG:
      case V_ENDPOINT_S3:
      case V_WORKSPACES_FIELD:
        this.beginCapture(role, MAX_REMOTE_VALUE_BYTES, true);
        return true;
      default:
        return false;
    }
  }

  /** A value of a role that wanted a string got something else. */
  private noValue(role: number): void {
    if (role === V_MODE || role === V_TYPE) this.ignored = true;
  }

  private startDigest(): void {
    this.digest = new ValueDigest(this.keys);
    this.digestBase = this.depth;
  }

  private beginCapture(role: number, limit: number, charged: boolean): void {
    this.strMode = S_CAPTURE;
    this.capRole = role;
    this.capParts = [];
    this.capEscaped = false;
    this.capLen = 0;
    this.capLimit = limit;
    this.capOver = false;
    this.capCharged = charged;
  }

  private capture(buf: Buffer, start: number, end: number): void {
    if (this.capOver || start >= end) return;
    const len = end - start;
    if (this.capLen + len > this.capLimit) {
      this.capOver = true;
      this.capParts = [];
      return;
    }
    if (this.capCharged) {
      if (this.overflow !== null) return; // over a limit: nothing more is kept
      this.charge(len);
      if (this.capOver) return;
    }
    if (this.capLimit <= KEY_MATCH_BYTES) {
      const small = this.capSmall;
      for (let j = start, k = this.capLen; j < end; j++, k++) small[k] = buf[j];
    } else {
      this.capParts.push(Buffer.from(buf.subarray(start, end)));
    }
    this.capLen += len;
  }

  private captureEnd(): void {
    const role = this.capRole;
    this.capRole = R_SKIP;
    if (this.capOver) {
      this.capParts = [];
      this.overCap(role);
      return;
    }
    // Short captures are only compared with ASCII names: latin1 decodes them cheapest, and a
    // non-ASCII one still compares unequal.
    const raw =
      this.capLimit <= KEY_MATCH_BYTES
        ? this.capSmall.toString('latin1', 0, this.capLen)
        : Buffer.concat(this.capParts).toString('utf8');
    this.capParts = [];
    if (this.overflow !== null && role !== V_KEY && role !== V_MODE && role !== V_TYPE) return;
    const text = this.capIsString && this.capEscaped ? (JSON.parse(`"${raw}"`) as string) : raw;
    switch (role) {
      case V_KEY: {
        const roles = MEMBER_ROLES[this.roles[this.depth]];
        this.memberRole[this.depth] = Object.prototype.hasOwnProperty.call(roles, text)
          ? roles[text]
          : R_SKIP;
        this.lastKey = text;
        return;
      }
      case V_OUTPUT_NAME:
        this.charge(PER_OUTPUT_BYTES);
        this.outputName = text;
        this.memberRole[this.depth] = V_OUTPUT;
        return;
      case V_MODE:
        if (text === 'data') this.modeOk = true;
        else this.ignored = true;
        break;
      case V_TYPE:
        if (text === 'terraform_remote_state') this.typeOk = true;
        else this.ignored = true;
        break;
      case V_NAME:
        this.baseName = text;
        return;
      case V_INDEX_KEY:
        // As JSON.stringify writes the parsed key: `["a"]`, `[0]`.
        if (this.inst) {
          this.inst.indexKey = JSON.stringify(this.capIsString ? text : JSON.parse(text));
        }
        return;
      case V_BACKEND:
        if (this.inst) this.inst.backend = text;
        return;
      case V_WORKSPACE:
        if (this.inst) this.inst.workspace = text;
        return;
      case V_CONFIG:
        if (this.inst) setMember(this.inst.config, this.lastKey, text);
        return;
      case V_ENDPOINT_S3:
        if (this.inst) this.inst.config.endpoints = { s3: text };
        return;
      case V_WORKSPACES_FIELD:
        if (this.inst) {
          const workspaces = (this.inst.config.workspaces ?? {}) as Record<string, unknown>;
          setMember(workspaces, this.lastKey, text);
          this.inst.config.workspaces = workspaces;
        }
        return;
      default:
        return;
    }
    // mode or type decided: a limit broken before then applies now
    if (this.modeOk && this.typeOk && this.overflow !== null && !this.ignored) {
      throw new StateLimitError(this.overflow);
    }
  }

  /** A captured value went over its cap. */
  private overCap(role: number): void {
    switch (role) {
      case V_MODE:
      case V_TYPE:
        this.ignored = true; // not "data" / "terraform_remote_state"
        return;
      case V_KEY:
        this.memberRole[this.depth] = R_SKIP; // not a key we look at
        return;
      case V_BACKEND:
      case V_WORKSPACE:
      case V_CONFIG:
      case V_ENDPOINT_S3:
      case V_WORKSPACES_FIELD:
        // Longer than any address of this server: the source cannot be a state here.
        if (this.inst) this.inst.unresolvable = true;
        return;
      default:
        this.memberRole[this.depth] = R_SKIP;
        this.limit(
          `a terraform_remote_state data source name, instance key or output name is longer than ${MAX_REMOTE_VALUE_BYTES} bytes (the limit)`,
        );
    }
  }

  /** Counts kept bytes against the per-state budget. */
  private charge(n: number): void {
    this.elRetained += n;
    if (this.retained + this.elRetained > MAX_REMOTE_STATE_BYTES) {
      this.capOver = true;
      this.limit(
        `state's terraform_remote_state data sources hold more than ${MAX_REMOTE_STATE_BYTES} bytes of names, addresses and outputs (the limit per state)`,
      );
    }
  }

  /** A limit is broken: refused now for a remote state, remembered while the type is unknown. */
  private limit(message: string): void {
    if (this.modeOk && this.typeOk) throw new StateLimitError(message);
    if (this.overflow === null) this.overflow = message;
    this.digest = null; // nothing more is kept for this element
  }

  // ---------------------------------------------------------------- strings

  private stringContent(buf: Buffer, i: number, end: number): number {
    const start = i;
    while (i < end && STR_STOP[buf[i]] === 0) i++;
    if (i > start) this.content(buf, start, i);
    if (i === end) return i;
    const c = buf[i];
    if (c === 0x22) {
      this.stringEnd();
      this.tok = TK_NONE;
      return i + 1;
    }
    // a backslash (control bytes cannot appear in a valid string)
    if (this.strMode === S_CAPTURE) {
      this.capEscaped = true;
      this.capture(buf, i, i + 1);
    }
    this.tok = TK_ESC;
    return i + 1;
  }

  private content(buf: Buffer, start: number, end: number): void {
    if (this.strMode === S_CAPTURE) this.capture(buf, start, end);
    else if (this.strMode === S_DIGEST && this.digest !== null) this.digest.raw(buf, start, end);
  }

  private escape(buf: Buffer, i: number): number {
    const c = buf[i];
    if (this.strMode === S_CAPTURE) this.capture(buf, i, i + 1);
    if (c === 0x75) {
      this.hexLeft = 4;
      this.hexUnit = 0;
      this.tok = TK_HEX;
      return i + 1;
    }
    if (this.strMode === S_DIGEST && this.digest !== null) this.digest.unit(SIMPLE_ESCAPES[c]);
    this.tok = TK_STR;
    return i + 1;
  }

  private hex(buf: Buffer, i: number): number {
    const c = buf[i];
    if (this.strMode === S_CAPTURE) this.capture(buf, i, i + 1);
    this.hexUnit = (this.hexUnit << 4) | hexValue(c);
    if (--this.hexLeft === 0) {
      if (this.strMode === S_DIGEST && this.digest !== null) this.digest.unit(this.hexUnit);
      this.tok = TK_STR;
    }
    return i + 1;
  }

  private stringEnd(): void {
    if (this.strMode === S_DIGEST) {
      if (this.digest !== null) this.digest.stringEnd();
      if (!this.strIsKey) this.valueEnd();
      return;
    }
    if (this.strMode === S_CAPTURE) this.captureEnd();
  }

  // ---------------------------------------------------------------- numbers and literals

  private numberContent(buf: Buffer, i: number, end: number): number {
    const start = i;
    while (i < end && IS_NUM[buf[i]] === 1) i++;
    if (this.strMode === S_DIGEST) {
      if (this.numHash !== null) this.numHash.update(buf.subarray(start, i));
      else {
        this.numText += buf.toString('latin1', start, i);
        if (this.numText.length > LONG_NUMBER) {
          this.numHash = createHash('sha256').update(this.numText);
          this.numText = '';
        }
      }
    } else if (this.strMode === S_CAPTURE) {
      this.capture(buf, start, i);
    }
    if (i === end) return i;
    this.tok = TK_NONE;
    if (this.strMode === S_DIGEST) {
      if (this.digest !== null) {
        if (this.numHash !== null) this.digest.longNumber(this.numHash.digest('hex'));
        else this.digest.number(this.numText);
      }
      this.valueEnd();
    } else if (this.strMode === S_CAPTURE) {
      this.captureEnd();
    }
    return i;
  }

  private literalEnd(): void {
    this.tok = TK_NONE;
    const kind = this.litFirst === 0x74 ? 't' : this.litFirst === 0x66 ? 'f' : 'n';
    if (this.strMode === S_DIGEST) {
      if (this.digest !== null) this.digest.literal(kind);
      this.valueEnd();
    } else if (this.strMode === S_CAPTURE) {
      const text = kind === 't' ? 'true' : kind === 'f' ? 'false' : 'null';
      this.capture(Buffer.from(text), 0, text.length);
      this.captureEnd();
    }
  }

  // ---------------------------------------------------------------- skipping

  /** Inside a container nobody looks at: only brackets and strings matter. */
  private skip(buf: Buffer, i: number, end: number): number {
    while (i < end) {
      const c = buf[i];
      if (this.skipInString) {
        if (this.skipEscape) this.skipEscape = false;
        else if (c === 0x5c) this.skipEscape = true;
        else if (c === 0x22) this.skipInString = false;
        i++;
        continue;
      }
      i++;
      if (SKIP_STOP[c] === 0) continue;
      if (c === 0x22) this.skipInString = true;
      else if (c === 0x7b || c === 0x5b) this.skipDepth++;
      else if (--this.skipDepth === 0) {
        this.expectKey = false;
        return i;
      }
    }
    return i;
  }
}
