import { Column, Entity, PrimaryColumn } from 'typeorm';

/**
 * A bucket name the S3 door has served (STATEHOUSE_S3_DOOR_BUCKETS), and when it first did:
 * the creation time ListBuckets shows. Recorded once, by whichever replica served it first.
 */
@Entity({ name: 's3_buckets' })
export class S3BucketEntity {
  @PrimaryColumn({ type: 'text', primaryKeyConstraintName: 'pk_s3_buckets' })
  name!: string;

  @Column({ name: 'first_served_at', type: 'timestamptz', default: () => 'now()' })
  firstServedAt!: Date;
}
