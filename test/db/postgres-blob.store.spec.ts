import { PostgresBlobStore } from '../../src/storage/postgres-blob.store';
import { describeBlobStoreContract } from '../support/blob-store.contract';
import { openTestDatabase } from '../support/database';

// The postgres driver keeps blobs as ordered 1 MiB chunk rows in the real database.
describeBlobStoreContract('postgres', async () => {
  const db = await openTestDatabase();
  return { store: new PostgresBlobStore(db.dataSource), teardown: () => db.close() };
});
