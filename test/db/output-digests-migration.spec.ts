/**
 * The output-digests v2 migration on a database written under v1: every version's digests are
 * recomputed from its stored outputs (with the sensitive names and the two set digests the
 * graph looks versions up by), and what consumers recorded (v1 digests of values not at hand)
 * is translated through the producer's versions; a digest no version had stays unmatched.
 */
import { createHmac } from 'node:crypto';
import { OutputDigestsV21764600000000 } from '../../migrations/1764600000000-output-digests-v2';
import {
  digestKeys,
  digestValue,
  outputSetDigest,
  withoutNames,
} from '../../src/state/output-digests';
import { MemoryBlobStore } from '../../src/storage/memory-blob.store';
import { openTestDatabase, TestDatabase } from '../support/database';
import { ADMIN, body, buildServices } from '../support/services';

jest.setTimeout(120_000);

const KEY = Buffer.alloc(32, 7); // the key buildServices' digester uses
const KEYS = digestKeys(KEY);

/** Scheme v1, as it was: HMAC-SHA256 of canonical JSON (sorted keys). */
function v1(value: unknown): string {
  const canon = (v: unknown): string => {
    if (v === null || typeof v !== 'object') return JSON.stringify(v) ?? 'null';
    if (Array.isArray(v)) return `[${v.map(canon).join(',')}]`;
    return `{${Object.keys(v)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canon((v as Record<string, unknown>)[k])}`)
      .join(',')}}`;
  };
  return createHmac('sha256', KEY).update(canon(value)).digest('hex');
}

const state = (serial: number, outputs: Record<string, { value: unknown; sensitive?: boolean }>) =>
  JSON.stringify({ version: 4, serial, lineage: 'l', outputs, resources: [] });

describe('output digests v2 migration', () => {
  let db: TestDatabase;

  beforeAll(async () => {
    db = await openTestDatabase();
  });
  afterAll(async () => {
    await db?.close();
  });

  it('recomputes every version’s digests and translates what consumers recorded', async () => {
    const s = buildServices(db.dataSource, new MemoryBlobStore());
    const versions = [
      { a: { value: { x: [1, 'y'] } }, pw: { value: 's1', sensitive: true } },
      { a: { value: 2 }, pw: { value: 's1', sensitive: true } },
      { a: { value: 2 }, pw: { value: 's2', sensitive: true } },
    ];
    for (const [i, outputs] of versions.entries()) {
      await s.writer.write({
        unit: 'mig/producer',
        workspace: 'default',
        principal: ADMIN,
        door: 'api',
        body: body(state(i + 1, outputs)),
      });
    }
    const q = db.dataSource.createQueryRunner();
    await q.connect();
    try {
      // Back to the schema and digests the previous release left behind.
      const migration = new OutputDigestsV21764600000000();
      await migration.down(q);
      await q.query(`DELETE FROM settings WHERE key = 'graph_digest_key'`);
      await q.query(`INSERT INTO settings (key, value) VALUES ('graph_digest_key', $1)`, [
        KEY.toString('base64url'),
      ]);
      for (const [i, outputs] of versions.entries()) {
        await q.query(
          `UPDATE versions v SET output_digests = $2 FROM states s, units u
            WHERE v.state_id = s.id AND s.unit_id = u.id AND u.name = 'mig/producer' AND v.version = $1`,
          [i + 1, JSON.stringify({ a: v1(outputs.a.value), pw: v1(outputs.pw.value) })],
        );
      }
      const edge = (name: string, recorded: Record<string, string>) =>
        q.query(
          `INSERT INTO graph_edges (producer_unit, producer_workspace, consumer_unit, consumer_workspace,
                                    source, name, recorded, producer_version, created_by)
           VALUES ('mig/producer', 'default', 'mig/consumer', 'default', 'discovered', $1, $2, 1, 'x')`,
          [name, JSON.stringify(recorded)],
        );
      await edge('read-v1', { a: v1({ x: [1, 'y'] }), pw: v1('s1') });
      await edge('never-was', { a: v1('no version had this') });

      await migration.up(q);

      const rows = (await q.query(
        `SELECT v.version, v.output_digests, v.sensitive_outputs, v.output_set_digest,
                v.public_output_set_digest
           FROM versions v JOIN states s ON s.id = v.state_id JOIN units u ON u.id = s.unit_id
          WHERE u.name = 'mig/producer' ORDER BY v.version`,
      )) as {
        output_digests: Record<string, string>;
        sensitive_outputs: string[];
        output_set_digest: string;
        public_output_set_digest: string;
      }[];
      expect(rows).toHaveLength(3);
      for (const [i, row] of rows.entries()) {
        const digests = {
          a: digestValue(KEYS, versions[i].a.value),
          pw: digestValue(KEYS, versions[i].pw.value),
        };
        expect(row.output_digests).toEqual(digests);
        expect(row.sensitive_outputs).toEqual(['pw']);
        expect(row.output_set_digest).toBe(outputSetDigest(digests));
        expect(row.public_output_set_digest).toBe(outputSetDigest(withoutNames(digests, ['pw'])));
      }
      const edges = (await q.query(
        `SELECT name, recorded, sensitive_excluded FROM graph_edges
          WHERE consumer_unit = 'mig/consumer' ORDER BY name`,
      )) as { name: string; recorded: Record<string, string>; sensitive_excluded: boolean }[];
      expect(edges).toEqual([
        {
          name: 'never-was',
          recorded: { a: v1('no version had this') }, // matches no version, as before
          sensitive_excluded: true,
        },
        {
          name: 'read-v1',
          recorded: { a: digestValue(KEYS, { x: [1, 'y'] }), pw: digestValue(KEYS, 's1') },
          sensitive_excluded: true, // who wrote it is not known: judged without sensitive outputs
        },
      ]);
    } finally {
      await q.release();
    }
  });
});
