import { Column, Entity, PrimaryColumn } from 'typeorm';

/** The `postgres` blob driver's storage: a blob is its chunks in `seq` order. */
@Entity({ name: 'blob_chunks' })
export class BlobChunkEntity {
  @PrimaryColumn({
    name: 'blob_key',
    type: 'text',
    collation: 'C',
    primaryKeyConstraintName: 'pk_blob_chunks',
  })
  blobKey!: string;

  @PrimaryColumn({ type: 'integer', primaryKeyConstraintName: 'pk_blob_chunks' })
  seq!: number;

  @Column({ type: 'bytea' })
  data!: Buffer;
}
