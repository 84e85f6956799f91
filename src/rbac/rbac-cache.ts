import { Inject, Injectable, Logger, OnApplicationShutdown, OnModuleInit } from '@nestjs/common';
import { Client } from 'pg';
import { APP_CONFIG, AppConfig } from '../config/config';
import { CompiledRule } from './policy';
import { RBAC_CHANNEL } from './rbac.repository';

/**
 * Caches what authorization reads from the database (the initialised flag and each principal's
 * compiled rules), and drops it the moment anything changes: in process for the embedded
 * database (one process), and through PostgreSQL LISTEN/NOTIFY on a dedicated connection for
 * replicas. While that connection is down nothing is cached: every decision reads the database.
 */
@Injectable()
export class RbacCache implements OnModuleInit, OnApplicationShutdown {
  private readonly logger = new Logger('rbac-cache');
  private readonly rules = new Map<string, CompiledRule[]>();
  private initialisedFlag?: boolean;
  private listener?: Client;
  private listening = false;
  private stopped = false;
  private retry?: NodeJS.Timeout;

  constructor(@Inject(APP_CONFIG) private readonly config: AppConfig) {}

  async onModuleInit(): Promise<void> {
    if (this.config.databaseUrl) await this.listen();
  }

  async onApplicationShutdown(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.retry);
    await this.listener?.end().catch(() => undefined);
  }

  /** Caching is safe only when we are sure to hear about changes. */
  get enabled(): boolean {
    return !this.config.databaseUrl || this.listening;
  }

  invalidate(): void {
    this.rules.clear();
    this.initialisedFlag = undefined;
  }

  getInitialised(): boolean | undefined {
    return this.enabled ? this.initialisedFlag : undefined;
  }

  setInitialised(value: boolean): void {
    if (this.enabled) this.initialisedFlag = value;
  }

  getRules(key: string): CompiledRule[] | undefined {
    return this.enabled ? this.rules.get(key) : undefined;
  }

  setRules(key: string, rules: CompiledRule[]): void {
    if (!this.enabled) return;
    if (this.rules.size > 10_000) this.rules.clear(); // bounded: many principals, little memory
    this.rules.set(key, rules);
  }

  private async listen(): Promise<void> {
    const client = new Client({
      connectionString: this.config.databaseUrl?.reveal(),
      connectionTimeoutMillis: 5000,
    });
    const lost = (why: string, err?: unknown) => {
      if (this.listener !== client) return;
      this.listening = false;
      this.listener = undefined;
      this.invalidate();
      if (!this.stopped) {
        this.logger.warn(
          { err },
          `RBAC change notifications lost (${why}); deciding without a cache until they are back`,
        );
        this.retry = setTimeout(() => void this.listen(), 1000);
        this.retry.unref();
      }
    };
    client.on('notification', () => this.invalidate());
    client.on('error', (e) => lost('connection error', e));
    client.on('end', () => lost('connection closed'));
    this.listener = client;
    try {
      await client.connect();
      await client.query(`LISTEN ${RBAC_CHANNEL}`);
      this.invalidate(); // whatever happened while we were not listening
      this.listening = true;
    } catch (e) {
      await client.end().catch(() => undefined);
      lost('cannot listen', e);
    }
  }
}
