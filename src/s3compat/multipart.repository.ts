import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { sqlRows, TransactionStep } from '../database/sql';
import { transaction } from '../database/transaction';

export interface UploadRow {
  upload_id: string;
  bucket: string;
  object_key: string;
  unit: string;
  workspace: string;
  principal: string;
  created_at: Date;
}

export interface PartRow {
  upload_id: string;
  part_number: number;
  blob_key: string;
  size: string;
  md5: string;
  created_at: Date;
}

/** SQL for multipart uploads in progress. */
@Injectable()
export class MultipartRepository {
  constructor(private readonly db: DataSource) {}

  async create(row: Omit<UploadRow, 'created_at'>, inTransaction?: TransactionStep): Promise<void> {
    await transaction(this.db, async (m) => {
      await inTransaction?.(m);
      await m.query(
        `INSERT INTO s3_uploads (upload_id, bucket, object_key, unit, workspace, principal)
         VALUES ($1, $2, $3, $4, $5, $6)`,
        [row.upload_id, row.bucket, row.object_key, row.unit, row.workspace, row.principal],
      );
    });
  }

  async find(uploadId: string): Promise<UploadRow | undefined> {
    const rows = await sqlRows<UploadRow>(
      this.db.manager,
      'SELECT * FROM s3_uploads WHERE upload_id = $1',
      [uploadId],
    );
    return rows[0];
  }

  /** Records a part; returns the blob key of a part it replaced (to delete). */
  async putPart(
    row: Omit<PartRow, 'created_at'>,
    inTransaction?: TransactionStep,
  ): Promise<string | undefined> {
    return transaction(this.db, async (m) => {
      await inTransaction?.(m);
      const old = await sqlRows<{ blob_key: string }>(
        m,
        'SELECT blob_key FROM s3_upload_parts WHERE upload_id = $1 AND part_number = $2 FOR UPDATE',
        [row.upload_id, row.part_number],
      );
      await m.query(
        `INSERT INTO s3_upload_parts (upload_id, part_number, blob_key, size, md5)
         VALUES ($1, $2, $3, $4, $5)
         ON CONFLICT (upload_id, part_number)
         DO UPDATE SET blob_key = EXCLUDED.blob_key, size = EXCLUDED.size, md5 = EXCLUDED.md5, created_at = now()`,
        [row.upload_id, row.part_number, row.blob_key, row.size, row.md5],
      );
      return old[0]?.blob_key;
    });
  }

  async parts(uploadId: string): Promise<PartRow[]> {
    return sqlRows<PartRow>(
      this.db.manager,
      'SELECT * FROM s3_upload_parts WHERE upload_id = $1 ORDER BY part_number',
      [uploadId],
    );
  }

  /** Removes the upload; returns its parts' blob keys (to delete after). Undefined when gone. */
  async remove(uploadId: string, inTransaction?: TransactionStep): Promise<string[] | undefined> {
    return transaction(this.db, async (m) => {
      await inTransaction?.(m);
      const keys = await sqlRows<{ blob_key: string }>(
        m,
        'SELECT blob_key FROM s3_upload_parts WHERE upload_id = $1 FOR UPDATE',
        [uploadId],
      );
      // The parts go with the upload (ON DELETE CASCADE); their blobs are the caller's to delete.
      const gone = await sqlRows<{ upload_id: string }>(
        m,
        'DELETE FROM s3_uploads WHERE upload_id = $1 RETURNING upload_id',
        [uploadId],
      );
      return gone.length === 0 ? undefined : keys.map((k) => k.blob_key);
    });
  }

  /** Uploads older than `seconds` (abandoned, or completed by a process that then crashed). */
  async stale(seconds: number): Promise<string[]> {
    const rows = await sqlRows<{ upload_id: string }>(
      this.db.manager,
      `SELECT upload_id FROM s3_uploads WHERE created_at < now() - make_interval(secs => $1)`,
      [seconds],
    );
    return rows.map((r) => r.upload_id);
  }
}
