import { Injectable, OnModuleInit } from '@nestjs/common';
import { randomBytes } from 'node:crypto';
import { SharedSecrets } from '../database/shared-secrets.service';
import { outputDigests, outputValues } from '../graph/digests';

/**
 * Keyed digests of output values, stored with every version, so the dependency graph can tell
 * what changed without keeping or comparing values. The key is generated once and shared by
 * every replica through the database.
 */
@Injectable()
export class OutputDigester implements OnModuleInit {
  private key?: Buffer;

  constructor(private readonly secrets: SharedSecrets) {}

  /** A digester with a given key (tests wire services by hand). */
  static withKey(key: Buffer): OutputDigester {
    const d = new OutputDigester(undefined as unknown as SharedSecrets);
    d.key = key;
    return d;
  }

  async onModuleInit(): Promise<void> {
    if (this.key) return;
    const value = await this.secrets.getOrCreate('graph_digest_key', () =>
      randomBytes(32).toString('base64url'),
    );
    this.key = Buffer.from(value, 'base64url');
  }

  /** Digests of a state's outputs (`{name: {value, …}}`). */
  digestOutputs(outputs: Record<string, unknown> | null): Record<string, string> {
    return this.digestValues(outputValues(outputs));
  }

  /** Digests of plain values (`{name: value}`), e.g. the outputs a consumer read. */
  digestValues(values: Record<string, unknown>): Record<string, string> {
    if (!this.key) throw new Error('output digester is not initialised');
    return outputDigests(this.key, values);
  }
}
