import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { FIXTURES } from './paths';

/**
 * Terraform state documents for tests: one builder that every spec shapes through options, so the
 * layout of a test state lives in one place.
 *
 * The keys always come in the order Terraform writes them (version, terraform_version, serial,
 * lineage, outputs, resources, check_results). By default the document is pretty-printed with two
 * spaces and ends in a newline, like Terraform's own files; tests that hash or size the bytes rely
 * on that staying the same.
 */

/**
 * test/fixtures/terraform-1.11/simple.tfstate (written by real terraform), with its lineage and
 * serial read from it, so that `npm run fixtures` may write it again.
 */
export function simpleFixture(): { bytes: Buffer; lineage: string; serial: number } {
  const bytes = readFileSync(join(FIXTURES, 'simple.tfstate'));
  const { lineage, serial } = JSON.parse(bytes.toString()) as { lineage: string; serial: number };
  return { bytes, lineage, serial };
}

export interface TfStateOptions {
  serial: number;
  /** Default 'lineage-1'. */
  lineage?: string;
  /** Default '1.11.4'. */
  terraformVersion?: string;
  /**
   * Output values by name; each becomes `{ value, type }`, typed 'number' for a number and
   * 'string' otherwise. Default: no outputs.
   */
  outputs?: Record<string, unknown>;
  /** The `type` written for an output's value. Default: 'number' for a number, else 'string'. */
  outputType?: (value: unknown) => string;
  /** Outputs marked `sensitive: true`. Default: none. */
  sensitive?: string[];
  /** The `resources` array as written. Default: empty. */
  resources?: unknown[];
  /** Whether to write `check_results: null` (newer Terraform does). Default true. */
  checkResults?: boolean;
  /** One line with no indentation instead of pretty-printed. Default false. */
  compact?: boolean;
  /** Whether the text ends in '\n'. Default true. */
  newline?: boolean;
}

/** A Terraform v4 state document as text. */
export function tfStateText(options: TfStateOptions): string {
  const outputs: Record<string, unknown> = {};
  const outputType =
    options.outputType ?? ((value) => (typeof value === 'number' ? 'number' : 'string'));
  for (const [name, value] of Object.entries(options.outputs ?? {})) {
    outputs[name] = {
      value,
      type: outputType(value),
      ...(options.sensitive?.includes(name) ? { sensitive: true } : {}),
    };
  }
  const doc: Record<string, unknown> = {
    version: 4,
    terraform_version: options.terraformVersion ?? '1.11.4',
    serial: options.serial,
    lineage: options.lineage ?? 'lineage-1',
    outputs,
    resources: options.resources ?? [],
  };
  if (options.checkResults ?? true) doc.check_results = null;
  const text = options.compact ? JSON.stringify(doc) : JSON.stringify(doc, null, 2);
  return (options.newline ?? true) ? text + '\n' : text;
}

/** The same document as bytes (UTF-8). */
export function tfStateBytes(options: TfStateOptions): Buffer {
  return Buffer.from(tfStateText(options));
}

/** A managed `null_resource` named `r` with one instance whose id attribute is `id`. */
export function nullResource(id: string): unknown {
  return {
    mode: 'managed',
    type: 'null_resource',
    name: 'r',
    provider: 'provider["registry.terraform.io/hashicorp/null"]',
    instances: [{ schema_version: 0, attributes: { id } }],
  };
}
