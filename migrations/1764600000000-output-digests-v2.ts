import { randomBytes } from 'node:crypto';
import { QueryRunner } from 'typeorm';
import type { LeveledMigration } from '../src/database/schema-compat';
import {
  digestKeys,
  DigestKeys,
  outputDigests,
  outputSetDigest,
  outputValues,
  sensitiveNames,
  withoutNames,
} from '../src/state/output-digests';

/** Versions read and rewritten per statement (fewer when their outputs are large). */
const BATCH_ROWS = 200;
const BATCH_BYTES = 32 * 1024 * 1024;

interface VersionMeta {
  id: string;
  state_id: string;
  version: number;
  size: string;
}

/**
 * Output digests scheme v2 (src/graph/digests.ts: computed while a state streams in, so a
 * write never holds a consumer's `terraform_remote_state` outputs in memory), and what the
 * graph needs to keep a write's cost independent of the producers' history:
 *
 * - versions: `sensitive_outputs` (names), `output_set_digest` and `public_output_set_digest`
 *   (one digest of all output digests, and of the non-sensitive ones), indexed per state;
 * - graph_edges: `sensitive_excluded` — the edge's author may not read the producer's sensitive
 *   outputs, so they are left out of its comparisons.
 *
 * Every version's digests are recomputed from its stored outputs. What consumers read
 * (`graph_edges.recorded`, v1 digests of values no longer at hand) is translated through the
 * producer's versions: a v1 digest equal to one of a kept version's is that version's value, so
 * it becomes that value's v2 digest; one matching no kept version stays as it was and, as before,
 * matches nothing. Existing edges are marked `sensitive_excluded` until their consumer is written
 * again (or, for a declared edge, until then), since who wrote them is not known here: the
 * conservative choice, as an edge that compared sensitive outputs for a writer who may not read
 * them lets that writer confirm a guess. The graph digest key is created here when it does not
 * exist yet (as the server would at its first start), under the migration lock.
 */
export class OutputDigestsV21764600000000 implements LeveledMigration {
  name = 'OutputDigestsV21764600000000';
  /** Contract: output digests become v2, which code before this migration does not compute. */
  readonly contractFloor = 1764600000000;

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE "versions" ADD "sensitive_outputs" text array`);
    await q.query(`ALTER TABLE "versions" ADD "output_set_digest" text`);
    await q.query(`ALTER TABLE "versions" ADD "public_output_set_digest" text`);
    await q.query(
      `ALTER TABLE "graph_edges" ADD "sensitive_excluded" boolean NOT NULL DEFAULT false`,
    );
    await this.recompute(q);
    await q.query(`UPDATE graph_edges SET sensitive_excluded = true`);
    await q.query(
      `CREATE INDEX "ix_versions_output_set" ON "versions"("state_id", "output_set_digest", "version") `,
    );
    await q.query(
      `CREATE INDEX "ix_versions_public_output_set" ON "versions"("state_id", "public_output_set_digest", "version") `,
    );
  }

  async down(q: QueryRunner): Promise<void> {
    // The digests stay v2: the values v1 was computed from are not all at hand any more.
    await q.query(`DROP INDEX "ix_versions_public_output_set"`);
    await q.query(`DROP INDEX "ix_versions_output_set"`);
    await q.query(`ALTER TABLE "graph_edges" DROP COLUMN "sensitive_excluded"`);
    await q.query(`ALTER TABLE "versions" DROP COLUMN "public_output_set_digest"`);
    await q.query(`ALTER TABLE "versions" DROP COLUMN "output_set_digest"`);
    await q.query(`ALTER TABLE "versions" DROP COLUMN "sensitive_outputs"`);
  }

  private async recompute(q: QueryRunner): Promise<void> {
    const metas = (await q.query(
      `SELECT id, state_id, version, pg_column_size(outputs)::bigint AS size
         FROM versions WHERE outputs IS NOT NULL ORDER BY state_id, version`,
    )) as VersionMeta[];
    if (metas.length === 0) return;
    const keys = await this.keys(q);
    // Per producer state: for each output name, v1 digest → v2 digest.
    let state: string | undefined;
    let translation = new Map<string, Map<string, string>>();
    let batch: VersionMeta[] = [];
    let batchBytes = 0;
    const flush = async (): Promise<void> => {
      if (batch.length === 0) return;
      await this.rewrite(q, keys, batch, translation);
      batch = [];
      batchBytes = 0;
    };
    for (const meta of metas) {
      if (meta.state_id !== state) {
        await flush();
        if (state !== undefined) await this.translateEdges(q, state, translation);
        state = meta.state_id;
        translation = new Map();
      }
      if (batch.length >= BATCH_ROWS || batchBytes + Number(meta.size) > BATCH_BYTES) await flush();
      batch.push(meta);
      batchBytes += Number(meta.size);
    }
    await flush();
    if (state !== undefined) await this.translateEdges(q, state, translation);
  }

  private async keys(q: QueryRunner): Promise<DigestKeys> {
    await q.query(
      `INSERT INTO settings (key, value) VALUES ('graph_digest_key', $1) ON CONFLICT (key) DO NOTHING`,
      [randomBytes(32).toString('base64url')],
    );
    const rows = (await q.query(`SELECT value FROM settings WHERE key = 'graph_digest_key'`)) as {
      value: string;
    }[];
    return digestKeys(Buffer.from(rows[0].value, 'base64url'));
  }

  /** New digests for a batch of versions (of one state), noting what each v1 digest became. */
  private async rewrite(
    q: QueryRunner,
    keys: DigestKeys,
    batch: VersionMeta[],
    translation: Map<string, Map<string, string>>,
  ): Promise<void> {
    const rows = (await q.query(
      `SELECT id, outputs, output_digests FROM versions WHERE id = ANY($1::uuid[])`,
      [batch.map((b) => b.id)],
    )) as {
      id: string;
      outputs: Record<string, unknown>;
      output_digests: Record<string, string> | null;
    }[];
    const updates = rows.map((r) => {
      const v2 = outputDigests(keys, outputValues(r.outputs));
      const sensitive = sensitiveNames(r.outputs);
      for (const [name, old] of Object.entries(r.output_digests ?? {})) {
        if (v2[name] === undefined) continue;
        let byName = translation.get(name);
        if (!byName) translation.set(name, (byName = new Map<string, string>()));
        byName.set(old, v2[name]);
      }
      return {
        id: r.id,
        digests: v2,
        sensitive,
        all: outputSetDigest(v2),
        public: outputSetDigest(withoutNames(v2, sensitive)),
      };
    });
    await q.query(
      `UPDATE versions v
          SET output_digests = x.digests, sensitive_outputs = x.sensitive,
              output_set_digest = x.all, public_output_set_digest = x.public
         FROM jsonb_to_recordset($1::jsonb)
              AS x(id uuid, digests jsonb, sensitive text[], "all" text, public text)
        WHERE v.id = x.id`,
      [JSON.stringify(updates)],
    );
  }

  /** What consumers recorded of this producer state, in v2. */
  private async translateEdges(
    q: QueryRunner,
    stateId: string,
    translation: Map<string, Map<string, string>>,
  ): Promise<void> {
    const edges = (await q.query(
      `SELECT e.id, e.recorded
         FROM states s
         JOIN units u ON u.id = s.unit_id
         JOIN graph_edges e ON e.producer_unit = u.name AND e.producer_workspace = s.workspace
        WHERE s.id = $1`,
      [stateId],
    )) as { id: string; recorded: Record<string, string> }[];
    if (edges.length === 0) return;
    const updates = edges.map((e) => ({
      id: e.id,
      recorded: Object.fromEntries(
        Object.entries(e.recorded ?? {}).map(([name, old]) => [
          name,
          translation.get(name)?.get(old) ?? old,
        ]),
      ),
    }));
    await q.query(
      `UPDATE graph_edges g SET recorded = x.recorded
         FROM jsonb_to_recordset($1::jsonb) AS x(id uuid, recorded jsonb)
        WHERE g.id = x.id`,
      [JSON.stringify(updates)],
    );
  }
}
