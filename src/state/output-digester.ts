import { Injectable, OnModuleInit } from '@nestjs/common';
import { randomBytes } from 'node:crypto';
import { SharedSecrets } from '../database/shared-secrets.service';
import {
  digestKeys,
  DigestKeys,
  outputDigests,
  outputSetDigest,
  outputValues,
  sensitiveNames,
  withoutNames,
} from '../graph/digests';

/** What a version stores for the dependency graph about its outputs. */
export interface OutputFacts {
  output_digests: Record<string, string>;
  sensitive_outputs: string[];
  output_set_digest: string;
  public_output_set_digest: string;
}

/** Where the graph digest key is kept (shared by every replica; read by the digest migration). */
export const GRAPH_DIGEST_KEY_SETTING = 'graph_digest_key';

/**
 * Keyed digests of output values (scheme v2, graph/digests.ts), stored with every version, so
 * the dependency graph can tell what changed without keeping or comparing values. The key is
 * generated once and shared by every replica through the database.
 */
@Injectable()
export class OutputDigester implements OnModuleInit {
  private digestKeys?: DigestKeys;

  constructor(private readonly secrets: SharedSecrets) {}

  /** A digester with a given key (tests wire services by hand). */
  static withKey(key: Buffer): OutputDigester {
    const d = new OutputDigester(undefined as unknown as SharedSecrets);
    d.digestKeys = digestKeys(key);
    return d;
  }

  async onModuleInit(): Promise<void> {
    if (this.digestKeys) return;
    const value = await this.secrets.getOrCreate(GRAPH_DIGEST_KEY_SETTING, () =>
      randomBytes(32).toString('base64url'),
    );
    this.digestKeys = digestKeys(Buffer.from(value, 'base64url'));
  }

  /** The keys, for inspectors that digest what remote-state data sources read while streaming. */
  get keys(): DigestKeys {
    if (!this.digestKeys) throw new Error('output digester is not initialised');
    return this.digestKeys;
  }

  /** Digests of a state's outputs (`{name: {value, …}}`). */
  digestOutputs(outputs: Record<string, unknown> | null): Record<string, string> {
    return this.digestValues(outputValues(outputs));
  }

  /** The digests of a state's outputs, which are sensitive, and the digests of both sets. */
  describeOutputs(outputs: Record<string, unknown> | null): OutputFacts {
    const digests = this.digestOutputs(outputs);
    const sensitive = sensitiveNames(outputs);
    return {
      output_digests: digests,
      sensitive_outputs: sensitive,
      output_set_digest: outputSetDigest(digests),
      public_output_set_digest: outputSetDigest(withoutNames(digests, sensitive)),
    };
  }

  /** Digests of plain values (`{name: value}`). */
  digestValues(values: Record<string, unknown>): Record<string, string> {
    return outputDigests(this.keys, values);
  }
}
