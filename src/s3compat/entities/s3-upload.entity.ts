import { Column, Entity, JoinColumn, ManyToOne, PrimaryColumn } from 'typeorm';

/** A multipart upload in progress on the S3 door. Only a completed upload becomes a version. */
@Entity({ name: 's3_uploads' })
export class S3UploadEntity {
  @PrimaryColumn({ name: 'upload_id', type: 'text', primaryKeyConstraintName: 'pk_s3_uploads' })
  uploadId!: string;

  @Column({ type: 'text' })
  bucket!: string;

  @Column({ name: 'object_key', type: 'text' })
  objectKey!: string;

  @Column({ type: 'text' })
  unit!: string;

  @Column({ type: 'text' })
  workspace!: string;

  /** Who started it: only that principal may add parts, complete or abort. */
  @Column({ type: 'text' })
  principal!: string;

  @Column({ name: 'created_at', type: 'timestamptz', default: () => 'now()' })
  createdAt!: Date;
}

/** One uploaded part; its bytes are a blob of their own until the upload completes. */
@Entity({ name: 's3_upload_parts' })
export class S3UploadPartEntity {
  @PrimaryColumn({
    name: 'upload_id',
    type: 'text',
    primaryKeyConstraintName: 'pk_s3_upload_parts',
  })
  uploadId!: string;

  @ManyToOne(() => S3UploadEntity, { onDelete: 'CASCADE' })
  @JoinColumn({ name: 'upload_id', foreignKeyConstraintName: 'fk_s3_upload_parts_upload' })
  upload?: S3UploadEntity;

  @PrimaryColumn({
    name: 'part_number',
    type: 'integer',
    primaryKeyConstraintName: 'pk_s3_upload_parts',
  })
  partNumber!: number;

  @Column({ name: 'blob_key', type: 'text' })
  blobKey!: string;

  @Column({ type: 'bigint' })
  size!: string;

  @Column({ type: 'char', length: 32 })
  md5!: string;

  @Column({ name: 'created_at', type: 'timestamptz', default: () => 'now()' })
  createdAt!: Date;
}
