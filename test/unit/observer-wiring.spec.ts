/**
 * The database and blob store layers import nothing from metrics: they declare observer tokens
 * and the (global) metrics module provides them. These tests build the real modules and check the
 * failures still reach the metrics, so a token that stops being provided is caught.
 */
import { Global, Logger, Module } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { DataSource } from 'typeorm';
import { ConfigModule } from '../../src/config/config.module';
import { loadConfig } from '../../src/config/config';
import { DATABASE_ERROR_OBSERVER } from '../../src/database/database.module';
import type { DatabaseErrorObserver } from '../../src/database/data-source';
import { MetricsModule } from '../../src/metrics/metrics.module';
import { MetricsService } from '../../src/metrics/metrics.service';
import { BLOB_STORE, BlobStore } from '../../src/storage/blob-store';
import { CachedBlobStore } from '../../src/storage/cached-blob.store';
import { ObservedBlobStore } from '../../src/storage/observed-blob.store';
import { StorageModule } from '../../src/storage/storage.module';
import { parseExposition, valueOf } from '../support/metrics';

Logger.overrideLogger(false);

/** The memory driver never touches the database; the storage module asks for it all the same. */
@Global()
@Module({ providers: [{ provide: DataSource, useValue: {} }], exports: [DataSource] })
class NoDatabaseModule {}

async function build(withMetrics: boolean) {
  const config = loadConfig({ NODE_ENV: 'test', STATEHOUSE_STORAGE: 'memory' });
  const moduleRef = await Test.createTestingModule({
    imports: [
      ConfigModule.forRoot(config),
      NoDatabaseModule,
      StorageModule,
      ...(withMetrics ? [MetricsModule] : []),
    ],
  }).compile();
  return moduleRef;
}

describe('observers the metrics module provides', () => {
  it('counts a failed blob store operation of the store the storage module builds', async () => {
    const moduleRef = await build(true);
    const store = moduleRef.get<BlobStore>(BLOB_STORE);
    // The read cache is outermost; the failures are counted below it, at the driver.
    expect(store).toBeInstanceOf(CachedBlobStore);
    const observed = (store as CachedBlobStore).inner;
    expect(observed).toBeInstanceOf(ObservedBlobStore);
    (observed as ObservedBlobStore).inner.stat = () => Promise.reject(new Error('disk gone'));
    await expect(store.stat('k')).rejects.toThrow('disk gone');
    const metrics = moduleRef.get(MetricsService);
    const samples = parseExposition((await metrics.exposition()).body);
    expect(valueOf(samples, 'statehouse_blob_store_errors_total', { operation: 'stat' })).toBe(1);
    await moduleRef.close();
  });

  it('leaves the store unwrapped when no metrics module is there', async () => {
    const moduleRef = await build(false);
    const store = moduleRef.get<BlobStore>(BLOB_STORE) as CachedBlobStore;
    expect(store.inner).not.toBeInstanceOf(ObservedBlobStore);
    await moduleRef.close();
  });

  it('counts database failures reported through DATABASE_ERROR_OBSERVER', async () => {
    const moduleRef = await build(true);
    const observe = moduleRef.get<DatabaseErrorObserver>(DATABASE_ERROR_OBSERVER);
    observe(Object.assign(new Error('deadlock'), { code: '40P01' }), 'query');
    const metrics = moduleRef.get(MetricsService);
    const samples = parseExposition((await metrics.exposition()).body);
    expect(valueOf(samples, 'statehouse_db_errors_total', { kind: 'serialization' })).toBe(1);
    await moduleRef.close();
  });
});
