/**
 * The audit queue never loses an event for another event's content, and keeps what it could
 * not store while the database is unreachable (AuditService against a stand-in database that
 * refuses chosen rows or is down). The real databases are in test/e2e/audit-content.spec.ts.
 */
import { Logger } from '@nestjs/common';
import fc from 'fast-check';
import type { DataSource } from 'typeorm';
import {
  AuditService,
  MAX_AUDIT_TEXT,
  MAX_QUEUED,
  storableEvent,
} from '../../src/audit/audit.service';
import type { SecurityEvent } from '../../src/audit/security-event';
import { errorForLog } from '../../src/common/error-log';
import { findUnstorableText } from '../../src/common/text';

const COLUMNS = 12;
const MARKER = 'content-marker-5e0f3a';

/** Rows as the INSERT sent them: [at, type, actor, action, unit, …, details, count]. */
class StandInDatabase {
  readonly rows: unknown[][] = [];
  down = false;
  /** A row whose actor is this is refused for its content, alone or in a batch. */
  refuseActor?: string;
  /** Goes down after this many more successful statements. */
  downAfter?: number;
  statements = 0;

  query(_sql: string, params: unknown[]): Promise<unknown[]> {
    this.statements++;
    if (this.downAfter !== undefined && this.downAfter-- <= 0) this.down = true;
    if (this.down) {
      return Promise.reject(
        Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' }),
      );
    }
    const rows: unknown[][] = [];
    for (let i = 0; i < params.length; i += COLUMNS) rows.push(params.slice(i, i + COLUMNS));
    if (rows.some((r) => r[2] === this.refuseActor)) {
      return Promise.reject(
        Object.assign(new Error('unsupported Unicode escape sequence'), {
          code: '22P05',
          detail: `\\u0000 cannot be converted to text. ${MARKER}`,
          parameters: params,
        }),
      );
    }
    this.rows.push(...rows);
    return Promise.resolve([]);
  }

  actors(): unknown[] {
    return this.rows.map((r) => r[2]);
  }
}

function service(db: StandInDatabase): AuditService {
  return new AuditService(db as unknown as DataSource);
}

const read = (actor: string) =>
  ({
    type: 'state.read',
    actor,
    outcome: 'success',
    action: 'unit.read',
    unit: 'team/app',
    door: 'api',
  }) as const;

let logs: { level: string; args: unknown[] }[];
let now: number;

beforeEach(() => {
  logs = [];
  for (const level of ['log', 'warn', 'error'] as const) {
    jest.spyOn(Logger.prototype, level).mockImplementation((...args: unknown[]) => {
      if (level !== 'log') logs.push({ level, args });
    });
  }
  now = Date.now();
  jest.spyOn(Date, 'now').mockImplementation(() => now);
});

afterEach(() => jest.restoreAllMocks());

describe('storableEvent', () => {
  const base: SecurityEvent = {
    type: 'auth.failed',
    actor: 'anonymous',
    outcome: 'denied',
    at: '2026-12-01T00:00:00.000Z',
  };

  it('escapes NUL and unpaired surrogates in every text, member names of details too', () => {
    const e = storableEvent({
      ...base,
      actor: 'a\u0000b',
      unit: 'u\ud800',
      workspace: '\udc00w',
      action: 'x\u0000',
      requestId: 'r\u0000',
      clientIp: '::1\u0000',
      details: { 'k\u0000': 'SHK1/\u0000/us-east-1', reason: 'bad \ud83d\ude00 \ud800', n: 3 },
    });
    expect(e).toMatchObject({
      actor: 'a\\u0000b',
      unit: 'u\\ud800',
      workspace: '\\udc00w',
      action: 'x\\u0000',
      requestId: 'r\\u0000',
      clientIp: '::1\\u0000',
      details: { 'k\\u0000': 'SHK1/\\u0000/us-east-1', reason: 'bad \ud83d\ude00 \\ud800', n: 3 },
    });
  });

  it('caps long values without splitting a surrogate pair, and keeps at most 32 details', () => {
    const details: Record<string, string> = {};
    for (let i = 0; i < 40; i++) details[`k${i}`] = 'v';
    const e = storableEvent({
      ...base,
      actor: 'x'.repeat(MAX_AUDIT_TEXT - 2) + '\ud83d\ude00' + 'y'.repeat(100),
      details: { ...details, reason: 'r'.repeat(100_000) },
    });
    expect(e.actor.length).toBeLessThanOrEqual(MAX_AUDIT_TEXT);
    expect(e.actor.endsWith('…')).toBe(true);
    expect(e.actor).not.toMatch(/[\ud800-\udbff](?![\udc00-\udfff])/);
    expect(Object.keys(e.details ?? {})).toHaveLength(32);
  });
  it('makes any event storable: no NUL or unpaired surrogate left anywhere, every text capped', () => {
    const text = fc.string({
      unit: fc.oneof(
        fc.integer({ min: 0, max: 0xffff }).map((c) => String.fromCharCode(c)),
        fc.constantFrom('\u0000', '\ud800', '\udc00', '\ud83d\ude00'),
      ),
      maxLength: 1500,
    });
    fc.assert(
      fc.property(
        text,
        fc.option(text, { nil: undefined }),
        fc.dictionary(text, fc.oneof(text, fc.integer(), fc.boolean(), fc.constant(null)), {
          maxKeys: 40,
        }),
        (actor, unit, details) => {
          const e = storableEvent({ ...base, actor, unit, workspace: unit, details });
          expect(findUnstorableText(e, Infinity)).toBeUndefined();
          for (const v of [e.actor, e.unit, ...Object.keys(e.details ?? {})]) {
            expect((v ?? '').length).toBeLessThanOrEqual(MAX_AUDIT_TEXT);
          }
          expect(Object.keys(e.details ?? {}).length).toBeLessThanOrEqual(32);
        },
      ),
      { numRuns: 300 },
    );
  });
});

describe('AuditService queue', () => {
  it('a batch refused for one row’s content is retried row by row: every other event lands', async () => {
    const db = new StandInDatabase();
    db.refuseActor = 'bad';
    const audit = service(db);
    for (let i = 0; i < 10; i++) audit.record(read(`good-${i}`));
    audit.record(read('bad'));
    for (let i = 10; i < 20; i++) audit.record(read(`good-${i}`));
    await audit.flush();
    expect(db.actors()).toEqual(Array.from({ length: 20 }, (_, i) => `good-${i}`));
    expect(audit.lost()).toEqual({ queueFull: 0, unstorable: 1, atShutdown: 0 });
    // Logged with its type; no content of it (nor the database's detail of it).
    const lost = logs.filter((l) => l.level === 'error');
    expect(lost).toHaveLength(1);
    expect(lost[0].args[0]).toMatchObject({ eventType: 'state.read' });
    // As the logger writes it: `err` through the one error serializer.
    const fields = lost[0].args[0] as { err: unknown };
    const written = JSON.stringify({ ...fields, err: errorForLog(fields.err) });
    expect(written).not.toContain('"bad"');
    expect(written).not.toContain(MARKER);
    expect(written).toContain('22P05');
  });

  it('a batch that fails because the database is unreachable waits in the queue and lands later, in order', async () => {
    const db = new StandInDatabase();
    const audit = service(db);
    db.down = true;
    for (let i = 0; i < 5; i++) audit.record(read(`e-${i}`));
    await audit.flush();
    expect(db.rows).toHaveLength(0);
    audit.record(read('e-5'));
    db.down = false;
    await audit.flush(); // within the pause after the failure: not tried yet
    expect(db.rows).toHaveLength(0);
    now += 1500;
    await audit.flush();
    expect(db.actors()).toEqual(['e-0', 'e-1', 'e-2', 'e-3', 'e-4', 'e-5']);
    expect(audit.lost()).toEqual({ queueFull: 0, unstorable: 0, atShutdown: 0 });
  });

  it('the database going away during the row-by-row retry re-queues the rows not yet tried', async () => {
    const db = new StandInDatabase();
    db.refuseActor = 'bad';
    const audit = service(db);
    audit.record(read('a'));
    audit.record(read('bad'));
    audit.record(read('b'));
    audit.record(read('c'));
    db.downAfter = 3; // the batch, then 'a', then 'bad'; 'b' finds the database gone
    await audit.flush();
    expect(db.actors()).toEqual(['a']);
    db.down = false;
    db.downAfter = undefined;
    now += 1500;
    await audit.flush();
    expect(db.actors()).toEqual(['a', 'b', 'c']);
    expect(audit.lost().unstorable).toBe(1);
  });

  it(`keeps at most ${MAX_QUEUED} events while the database is down, dropping and counting the oldest`, async () => {
    const db = new StandInDatabase();
    db.down = true;
    const audit = service(db);
    for (let i = 0; i < MAX_QUEUED + 7; i++) audit.record(read(`e-${i}`));
    await audit.flush();
    expect(audit.lost().queueFull).toBe(7);
    db.down = false;
    now += 1500;
    await audit.flush();
    await audit.flush();
    expect(db.rows).toHaveLength(MAX_QUEUED);
    expect(db.rows[0][2]).toBe('e-7');
    expect(db.rows[MAX_QUEUED - 1][2]).toBe(`e-${MAX_QUEUED + 6}`);
    const warned = logs.filter((l) => l.level === 'warn').map((l) => String(l.args.at(-1)));
    expect(warned.some((m) => /the 7 oldest .* were not stored/.test(m))).toBe(true);
  });

  it('the stop waits for a batch being stored, then stores what was queued meanwhile', async () => {
    const db = new StandInDatabase();
    const audit = service(db);
    audit.record(read('first'));
    let release: () => void = () => undefined;
    const slow = new Promise<void>((r) => (release = r));
    const query = db.query.bind(db);
    jest.spyOn(db, 'query').mockImplementationOnce(async (sql: string, params: unknown[]) => {
      await slow;
      return query(sql, params);
    });
    const storing = audit.flush(); // the timer's flush, still under way when the stop comes
    audit.record(read('meanwhile'));
    const stopped = audit.beforeApplicationShutdown();
    release();
    await Promise.all([storing, stopped]);
    expect(db.actors()).toEqual(['first', 'meanwhile']);
    expect(audit.lost()).toEqual({ queueFull: 0, unstorable: 0, atShutdown: 0 });
    expect(logs.filter((l) => l.level === 'error')).toEqual([]);
  });

  it('the stop tries an unreachable database once more, then counts what it could not store', async () => {
    const db = new StandInDatabase();
    const audit = service(db);
    db.down = true;
    audit.record(read('a'));
    audit.record(read('b'));
    await audit.flush(); // failed: back in the queue, to be tried after a pause
    const before = db.statements;
    await audit.beforeApplicationShutdown();
    expect(db.statements).toBe(before + 1); // tried again at once, not in a loop
    expect(audit.lost().atShutdown).toBe(2);
  });

  it('counts an aggregated refusal by the failures it stands for', async () => {
    const db = new StandInDatabase();
    db.down = true;
    const audit = service(db);
    for (let i = 0; i < 3; i++) {
      audit.record({
        type: 'auth.failed',
        actor: 'anonymous',
        outcome: 'denied',
        door: 's3',
        details: { reason: 'x' },
      });
    }
    await audit.beforeApplicationShutdown();
    expect(audit.lost().atShutdown).toBe(3);
    const last = logs.filter((l) => l.level === 'error').at(-1);
    expect(last?.args[0]).toEqual({ eventTypes: { 'auth.failed': 3 } });
  });

  it('stores the exact attack — a NUL in the credential scope — escaped, with its neighbours', async () => {
    const db = new StandInDatabase();
    const audit = service(db);
    audit.record(read('before'));
    audit.record({
      type: 'auth.failed',
      actor: 'anonymous',
      outcome: 'denied',
      door: 's3',
      details: { code: 'AuthorizationHeaderMalformed', reason: 'incorrect date format "\u0000"' },
    });
    audit.record(read('after'));
    await audit.flush();
    expect(db.actors()).toEqual(['before', 'anonymous', 'after']);
    const details = JSON.parse(db.rows[1][10] as string) as Record<string, string>;
    expect(details.reason).toBe('incorrect date format "\\u0000"');
    expect(Object.values(details).join('')).not.toContain('\u0000');
  });
});

describe('reading the audit log', () => {
  it('stores what was queued while a batch was being stored before it reads', async () => {
    const db = new StandInDatabase();
    let release!: () => void;
    const slow = new Promise<void>((r) => (release = r));
    const query = db.query.bind(db);
    db.query = async (sql: string, params: unknown[]) => {
      if (db.statements === 0) await slow; // the first batch is still being stored…
      return query(sql, params);
    };
    const svc = service(db);
    svc.record(read('svc:first'));
    const first = svc.flush();
    svc.record(read('svc:queued-meanwhile')); // …when this one is recorded
    const stored = svc.storeQueued();
    release();
    await Promise.all([first, stored]);
    expect(db.actors()).toEqual(['svc:first', 'svc:queued-meanwhile']);
  });
});
