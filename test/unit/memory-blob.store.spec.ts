import { MemoryBlobStore } from '../../src/storage/memory-blob.store';
import { describeBlobStoreContract } from '../support/blob-store.contract';

describeBlobStoreContract('memory', () => {
  const store = new MemoryBlobStore();
  return Promise.resolve({ store, teardown: () => store.close() });
});
