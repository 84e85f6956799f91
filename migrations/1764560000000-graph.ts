import { MigrationInterface, QueryRunner } from 'typeorm';

/** The dependency graph: output digests on versions, and edges between states. */
export class Graph1764560000000 implements MigrationInterface {
  name = 'Graph1764560000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(
      `CREATE TABLE "graph_edges" ("id" uuid NOT NULL DEFAULT gen_random_uuid(), "producer_unit" text COLLATE "C" NOT NULL, "producer_workspace" text COLLATE "C" NOT NULL, "consumer_unit" text COLLATE "C" NOT NULL, "consumer_workspace" text COLLATE "C" NOT NULL, "source" text NOT NULL, "name" text NOT NULL, "outputs" text array, "input" text, "recorded" jsonb NOT NULL DEFAULT '{}', "producer_version" integer, "recorded_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(), "created_by" text NOT NULL, "created_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(), CONSTRAINT "pk_graph_edges" PRIMARY KEY ("id"))`,
    );
    await q.query(
      `CREATE INDEX "ix_graph_edges_producer" ON "graph_edges"("producer_unit", "producer_workspace") `,
    );
    await q.query(
      `CREATE UNIQUE INDEX "uq_graph_edges" ON "graph_edges"("consumer_unit", "consumer_workspace", "source", "name", "producer_unit", "producer_workspace") `,
    );
    await q.query(`ALTER TABLE "versions" ADD "output_digests" jsonb`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE "graph_edges"`);
    await q.query(`ALTER TABLE "versions" DROP COLUMN "output_digests"`);
  }
}
