import { Global, Inject, Injectable, Module, OnApplicationShutdown } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { APP_CONFIG, AppConfig } from '../config/config';
import { BLOB_STORE, BlobStore } from './blob-store';
import { FsBlobStore } from './fs-blob.store';
import { MemoryBlobStore } from './memory-blob.store';
import { PostgresBlobStore } from './postgres-blob.store';
import { S3BlobStore } from './s3-blob.store';

/** Builds the configured driver (the config loader has already refused unknown names). */
export function createBlobStore(config: AppConfig, db: DataSource): BlobStore {
  const { driver } = config.storage;
  switch (driver) {
    case 'fs':
      return new FsBlobStore(config.storage.fsDir);
    case 's3': {
      const s3 = config.storage.s3;
      if (!s3) throw new Error('s3 storage settings are missing');
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

@Injectable()
class BlobStoreCloser implements OnApplicationShutdown {
  constructor(@Inject(BLOB_STORE) private readonly store: BlobStore) {}
  async onApplicationShutdown(): Promise<void> {
    await this.store.close();
  }
}

@Global()
@Module({
  providers: [
    {
      provide: BLOB_STORE,
      useFactory: (config: AppConfig, db: DataSource) => createBlobStore(config, db),
      inject: [APP_CONFIG, DataSource],
    },
    BlobStoreCloser,
  ],
  exports: [BLOB_STORE],
})
export class StorageModule {}
