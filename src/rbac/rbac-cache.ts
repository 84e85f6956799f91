import {
  Inject,
  Injectable,
  Logger,
  BeforeApplicationShutdown,
  OnModuleInit,
} from '@nestjs/common';
import { Client } from 'pg';
import { APP_CONFIG, AppConfig } from '../config/config';
import { CompiledRule } from './policy';
import { RBAC_CHANNEL } from './rbac.repository';

/**
 * Caches what authorization reads from the database (the initialised flag and each principal's
 * compiled rules), and drops it the moment anything changes: in process for the embedded
 * database (one process), and through PostgreSQL LISTEN/NOTIFY on a dedicated connection for
 * replicas. While that connection is down nothing is cached: every decision reads the database.
 *
 * Other caches that need the same guarantee (the credential revocation list) do not open a
 * second listener: they `watch` a channel of their own on this connection, and follow `enabled`.
 */
@Injectable()
export class RbacCache implements OnModuleInit, BeforeApplicationShutdown {
  private readonly logger = new Logger('rbac-cache');
  private readonly rules = new Map<string, CompiledRule[]>();
  private initialisedFlag?: boolean;
  private listener?: Client;
  private listening = false;
  private stopped = false;
  private retry?: NodeJS.Timeout;
  /** Other caches kept alike: what each drops on a NOTIFY on its channel (and on any loss). */
  private readonly watchers = new Map<string, () => void>();

  constructor(@Inject(APP_CONFIG) private readonly config: AppConfig) {}

  async onModuleInit(): Promise<void> {
    if (this.config.databaseUrl) await this.listen();
  }

  async beforeApplicationShutdown(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.retry);
    await this.listener?.end().catch(() => undefined);
  }

  /** Caching is safe only when we are sure to hear about changes. */
  get enabled(): boolean {
    return !this.config.databaseUrl || this.listening;
  }

  private generationCount = 0;

  invalidate(): void {
    this.generationCount++;
    this.rules.clear();
    this.initialisedFlag = undefined;
  }

  /**
   * Changes with every invalidation. Read it before a database read and hand it to `set…`: an
   * answer read before a change but arriving after its notification is then not cached.
   */
  get generation(): number {
    return this.generationCount;
  }

  /**
   * Keeps another cache exactly like this one: `drop` runs on every NOTIFY on `channel` (from any
   * replica) and whenever the connection is lost or comes back; `enabled` says whether it may
   * cache at all. One watcher per channel.
   */
  watch(channel: string, drop: () => void): void {
    if (!/^[a-z_]+$/.test(channel) || channel === RBAC_CHANNEL || this.watchers.has(channel)) {
      throw new Error(`cannot watch channel ${channel}`);
    }
    this.watchers.set(channel, drop);
    // Watching after the connection is up: listen on it too, and say nothing is cached yet.
    const client = this.listener;
    if (client && this.listening) {
      this.listening = false;
      client.query(`LISTEN ${channel}`).then(
        () => {
          if (this.listener === client) this.listening = true;
        },
        (e: Error) => client.emit('error', e),
      );
    }
  }

  private dropAll(): void {
    this.invalidate();
    for (const drop of this.watchers.values()) drop();
  }

  getInitialised(): boolean | undefined {
    return this.enabled ? this.initialisedFlag : undefined;
  }

  setInitialised(value: boolean, generation: number): void {
    if (this.enabled && generation === this.generationCount) this.initialisedFlag = value;
  }

  getRules(key: string): CompiledRule[] | undefined {
    return this.enabled ? this.rules.get(key) : undefined;
  }

  setRules(key: string, rules: CompiledRule[], generation: number): void {
    if (!this.enabled || generation !== this.generationCount) return;
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
      this.dropAll();
      if (!this.stopped) {
        this.logger.warn(
          { err },
          `RBAC change notifications lost (${why}); deciding without a cache until they are back`,
        );
        this.retry = setTimeout(() => void this.listen(), 1000);
        this.retry.unref();
      }
    };
    client.on('notification', (msg) => {
      if (msg.channel === RBAC_CHANNEL) this.invalidate();
      else this.watchers.get(msg.channel)?.();
    });
    client.on('error', (e) => lost('connection error', e));
    client.on('end', () => lost('connection closed'));
    this.listener = client;
    try {
      await client.connect();
      for (const channel of [RBAC_CHANNEL, ...this.watchers.keys()]) {
        await client.query(`LISTEN ${channel}`);
      }
      this.dropAll(); // whatever happened while we were not listening
      this.listening = true;
    } catch (e) {
      await client.end().catch(() => undefined);
      lost('cannot listen', e);
    }
  }
}
