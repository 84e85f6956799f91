import type { Logger } from '@nestjs/common';
import type { BlobStore } from './blob-store';

/**
 * Deletes blobs best-effort: each key is tried in turn, and a failure is logged (with `what`
 * describing the blob) and does not stop the others or reach the caller.
 */
export async function deleteBlobs(
  store: BlobStore,
  keys: readonly string[],
  logger: Pick<Logger, 'warn'>,
  what = 'could not delete an unreferenced blob',
): Promise<void> {
  for (const key of keys) {
    try {
      await store.delete(key);
    } catch (e) {
      logger.warn({ err: e, blobKey: key }, what);
    }
  }
}
