import {
  Global,
  Inject,
  Injectable,
  Logger,
  Module,
  OnApplicationBootstrap,
  BeforeApplicationShutdown,
} from '@nestjs/common';
import { DataSource } from 'typeorm';
import { APP_CONFIG, AppConfig } from '../config/config';
import { BLOB_STORE, BlobStore } from './blob-store';
import { CachedBlobStore } from './cached-blob.store';
import { FsBlobStore } from './fs-blob.store';
import { MemoryBlobStore } from './memory-blob.store';
import { BlobStoreOperation, ObservedBlobStore } from './observed-blob.store';
import { PostgresBlobStore } from './postgres-blob.store';
import type { S3BlobStore as S3BlobStoreClass } from './s3-blob.store';

/**
 * Told of each blob store operation that failed in the store. Provided by the metrics module
 * (global); optional, so the storage layer depends on nothing above it.
 */
export const BLOB_STORE_FAILURE_OBSERVER = Symbol('BLOB_STORE_FAILURE_OBSERVER');
export type BlobStoreFailureObserver = (operation: BlobStoreOperation) => void;

/** Builds the configured driver (the config loader has already refused unknown names). */
export function createBlobStore(config: AppConfig, db: DataSource): BlobStore {
  const { driver } = config.storage;
  switch (driver) {
    case 'fs':
      return new FsBlobStore(config.storage.fsDir);
    case 's3': {
      const s3 = config.storage.s3;
      if (!s3) throw new Error('s3 storage settings are missing');
      // Loaded only here: the AWS SDK costs every other start ~0.15 s of module loading.
      // eslint-disable-next-line @typescript-eslint/no-require-imports
      const { S3BlobStore } = require('./s3-blob.store') as {
        S3BlobStore: typeof S3BlobStoreClass;
      };
      return new S3BlobStore({
        bucket: s3.bucket,
        prefix: s3.prefix,
        region: s3.region,
        endpoint: s3.endpoint,
        forcePathStyle: s3.forcePathStyle,
      });
    }
    case 'postgres':
      return new PostgresBlobStore(db);
    case 'memory':
      return new MemoryBlobStore();
  }
}

/**
 * The configured driver itself; BLOB_STORE is the same store with its failures counted and
 * recently read blobs kept in memory (`STATEHOUSE_BLOB_CACHE_MIB`).
 */
const BLOB_DRIVER = Symbol('BLOB_DRIVER');

/** Interrupted uploads older than this are removed at start. */
const STALE_TEMP_MS = 60 * 60 * 1000;

@Injectable()
class BlobStoreLifecycle implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly logger = new Logger('storage');
  constructor(@Inject(BLOB_DRIVER) private readonly store: BlobStore) {}

  async onApplicationBootstrap(): Promise<void> {
    if (this.store instanceof FsBlobStore) {
      const removed = await this.store.removeStaleTemp(STALE_TEMP_MS);
      if (removed > 0)
        this.logger.log(`removed ${removed} interrupted upload(s) from the blob store`);
    }
  }

  async beforeApplicationShutdown(): Promise<void> {
    await this.store.close();
  }
}

@Global()
@Module({
  providers: [
    {
      provide: BLOB_DRIVER,
      useFactory: (config: AppConfig, db: DataSource) => createBlobStore(config, db),
      inject: [APP_CONFIG, DataSource],
    },
    {
      provide: BLOB_STORE,
      useFactory: (config: AppConfig, driver: BlobStore, onFailure?: BlobStoreFailureObserver) => {
        const observed = onFailure ? new ObservedBlobStore(driver, onFailure) : driver;
        const cacheBytes = config.storage.cacheMiB * 1024 * 1024;
        return cacheBytes > 0 ? new CachedBlobStore(observed, cacheBytes) : observed;
      },
      inject: [APP_CONFIG, BLOB_DRIVER, { token: BLOB_STORE_FAILURE_OBSERVER, optional: true }],
    },
    BlobStoreLifecycle,
  ],
  exports: [BLOB_STORE],
})
export class StorageModule {}
