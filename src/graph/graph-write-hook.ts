import { Inject, Injectable, OnModuleInit } from '@nestjs/common';
import type { EntityManager } from 'typeorm';
import { escapeUnstorable } from '../common/text';
import { APP_CONFIG, AppConfig } from '../config/config';
import { AuthorizationService } from '../rbac/authorization.service';
import type { RemoteStateSource } from '../state/state-inspector';
import { PurgeTarget, StateWriteHook, StateWriteHooks, WriteContext } from '../state/write-hooks';
import { outputSetDigest, withoutNames } from '../state/output-digests';
import { StateRepository } from '../state/state.repository';
import { NodeRef, nodeKey } from './graph-model';
import { DiscoveredEdge, GraphRepository } from './graph.repository';
import { producerRights } from './producer-rights';
import { resolveRemoteState, SelfAddresses } from './remote-config';

/**
 * What a consumer's write will do to its edges (computed before the transaction): its
 * discovered edges (kept as they are for an encrypted state), and the producers of its declared
 * edges whose sensitive outputs the writer may read (`undefined` when it has no declared edge).
 */
type Prepared = { sensitiveReadable: NodeRef[] | undefined } & (
  { kind: 'keep' } | { kind: 'replace'; edges: DiscoveredEdge[]; refused: number }
);

/**
 * The graph's state write hook: every write of a consumer records the edges its
 * `terraform_remote_state` data sources make (in the write's own transaction), and a purge
 * forgets them. Registered with the state module's hooks at start.
 */
@Injectable()
export class GraphWriteHook implements StateWriteHook, OnModuleInit {
  private self: SelfAddresses;

  constructor(
    private readonly repo: GraphRepository,
    private readonly states: StateRepository,
    private readonly authz: AuthorizationService,
    private readonly hooks: StateWriteHooks,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {
    const bases = [config.publicUrl, ...config.aliases];
    this.self = {
      bases,
      s3Port: config.s3Door.port || undefined,
      buckets: config.s3Door.buckets,
      workspacePrefixes: config.s3Door.workspacePrefixes,
    };
  }

  onModuleInit(): void {
    this.hooks.register(this);
  }

  /**
   * The ports the server actually listens on (PORT=0 and STATEHOUSE_S3_PORT=0 pick one): with
   * STATEHOUSE_ALIASES unset, `localhost` and `127.0.0.1` at that port are this server too; the
   * S3 door's own listener is at the S3 port of every base.
   */
  listeningOn(port: number, scheme: 'http' | 'https', s3Port?: number): void {
    const extra = this.config.defaultAliases
      ? [`${scheme}://localhost:${port}`, `${scheme}://127.0.0.1:${port}`]
      : [];
    const bases = [...new Set([...this.self.bases, ...extra])];
    this.self = { ...this.self, bases, s3Port };
  }

  /**
   * Before the write's transaction: which of the consumer's remote states are states here, and
   * may the writer read their outputs? An edge the writer could not have read is not recorded,
   * so nobody can plant a dependency to learn whether another state's outputs changed. When the
   * writer may read a producer's outputs but not its sensitive ones, what the consumer claims
   * to have read of those is dropped and the edge is judged without them: its colour, its
   * producer version and when it went stale then say nothing about a sensitive output, so a
   * guess written into a state cannot be confirmed. The data source's config (credentials
   * included) never reached this far: the inspector kept only its addressing keys.
   *
   * All the reading happens here, outside the transaction: the transaction (which holds the
   * embedded database's only connection) only writes the edges.
   */
  async prepare(ctx: WriteContext): Promise<Prepared> {
    const consumer = { unit: ctx.unit, workspace: ctx.workspace };
    const rights = producerRights(this.authz, ctx.principal);
    const declared = await this.repo.declaredProducers(consumer);
    const sensitiveReadable: NodeRef[] | undefined = declared.length > 0 ? [] : undefined;
    for (const p of declared) {
      if (await rights.sensitive(p)) sensitiveReadable?.push(p);
    }
    if (ctx.inspected.kind !== 'terraform') return { kind: 'keep', sensitiveReadable }; // encrypted
    const sources = new Map<
      string,
      { producer: NodeRef; names: Set<string>; list: RemoteStateSource[] }
    >();
    for (const source of ctx.inspected.remoteStates) {
      const producer = resolveRemoteState(source, this.self);
      if (!producer) continue;
      const k = nodeKey(producer);
      const entry = sources.get(k) ?? { producer, names: new Set<string>(), list: [] };
      sources.set(k, entry);
      if (entry.names.has(source.name)) continue; // the same data source twice: one edge
      entry.names.add(source.name);
      entry.list.push(source);
    }
    let refused = 0;
    const readable: { producer: NodeRef; list: RemoteStateSource[]; excluded: boolean }[] = [];
    for (const { producer, list } of sources.values()) {
      if (!(await rights.outputs(producer))) {
        refused += list.length;
        continue;
      }
      readable.push({ producer, list, excluded: !(await rights.sensitive(producer)) });
    }
    const sensitiveNow = new Map<string, readonly string[]>();
    const excludedProducers = readable.filter((r) => r.excluded).map((r) => r.producer);
    for (const p of await this.states.currentOutputs(excludedProducers)) {
      sensitiveNow.set(nodeKey(p), p.sensitive_outputs ?? []);
    }
    const edges: DiscoveredEdge[] = [];
    for (const { producer, list, excluded } of readable) {
      const drop = excluded ? (sensitiveNow.get(nodeKey(producer)) ?? []) : [];
      for (const source of list) {
        // Names and output names come from the state: a for_each key may hold a NUL.
        const recorded = storableKeys(
          drop.length > 0 ? withoutNames(source.outputs, drop) : source.outputs,
        );
        edges.push({
          producer,
          name: escapeUnstorable(source.name),
          recorded,
          setDigest: outputSetDigest(recorded),
          sensitiveExcluded: excluded,
        });
      }
    }
    return { kind: 'replace', edges, refused, sensitiveReadable };
  }

  /**
   * Inside the write's transaction, after the new version became current. A consumer that had
   * no declared edges when the write was prepared skips their update (on the embedded database
   * the costliest statement of a write): an edge declared meanwhile was recorded against the
   * producer's current version as it was made, which is what this write would have recorded
   * had it come first.
   */
  async apply(m: EntityManager, ctx: WriteContext, prepared: unknown): Promise<void> {
    const p = prepared as Prepared;
    await this.repo.recordConsumerWrite(
      m,
      { unit: ctx.unit, workspace: ctx.workspace },
      p.kind === 'replace' ? p.edges : undefined,
      p.sensitiveReadable,
      ctx.principal.subject,
    );
  }

  /** The purge hook: a purged consumer's edges go in the purge's own transaction. */
  async onPurge(m: EntityManager, target: PurgeTarget): Promise<void> {
    await this.repo.forgetConsumer(m, target.unit, target.workspace);
  }
}

/** The same digests under names the database can store (NUL written as `\u0000`). */
function storableKeys(digests: Record<string, string>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, digest] of Object.entries(digests)) {
    Object.defineProperty(out, escapeUnstorable(name), { value: digest, enumerable: true });
  }
  return out;
}
