import { Injectable } from '@nestjs/common';
import type { EntityManager } from 'typeorm';
import type { Principal } from '../common/principal';
import type { InspectedState } from './state-inspector';
import type { VersionRow } from './state.repository';

export interface WriteContext {
  principal: Principal;
  unit: string;
  workspace: string;
  inspected: InspectedState;
}

/**
 * Work that must happen with every accepted write (the dependency graph's edges): `prepare`
 * runs before the write's transaction (it may read and authorise), `apply` inside it, after the
 * new version became current — so the write and its consequences commit or vanish together.
 */
export interface StateWriteHook {
  prepare(ctx: WriteContext): Promise<unknown>;
  apply(
    m: EntityManager,
    ctx: WriteContext & { version: VersionRow },
    prepared: unknown,
  ): Promise<void>;
  /**
   * Inside a purge's transaction, before the unit (no `workspace`) or one workspace's state is
   * erased: whatever the hook keeps about it as a consumer goes with it.
   */
  onPurge?(m: EntityManager, target: PurgeTarget): Promise<void>;
}

/** What a purge erases: a whole unit (no `workspace`) or one workspace's state. */
export interface PurgeTarget {
  unit: string;
  workspace?: string;
}

@Injectable()
export class StateWriteHooks {
  private readonly hooks: StateWriteHook[] = [];

  register(hook: StateWriteHook): void {
    this.hooks.push(hook);
  }

  get any(): boolean {
    return this.hooks.length > 0;
  }

  /** Every hook's preparation, before the write's transaction. */
  prepareAll(ctx: WriteContext): Promise<unknown[]> {
    return Promise.all(this.hooks.map((h) => h.prepare(ctx)));
  }

  /** Inside the write's transaction, once the new version is current. */
  async applyAll(
    m: EntityManager,
    ctx: WriteContext & { version: VersionRow },
    prepared: unknown[],
  ): Promise<void> {
    for (const [i, h] of this.hooks.entries()) await h.apply(m, ctx, prepared[i]);
  }

  /** Inside the purge's transaction, before the rows go. */
  async purgeAll(m: EntityManager, target: PurgeTarget): Promise<void> {
    for (const h of this.hooks) await h.onPurge?.(m, target);
  }
}
