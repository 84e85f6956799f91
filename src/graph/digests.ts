import { createHmac } from 'node:crypto';

/**
 * Canonical JSON: object keys sorted, no whitespace, numbers and strings as JSON.stringify
 * writes them. Two equal values always give the same text, whatever their key order.
 */
export function canonicalJson(value: unknown): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value) ?? 'null';
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  const entries = Object.keys(value as Record<string, unknown>)
    .sort()
    .map((k) => `${JSON.stringify(k)}:${canonicalJson((value as Record<string, unknown>)[k])}`);
  return `{${entries.join(',')}}`;
}

/**
 * A keyed digest of each output value (HMAC-SHA256 under a server secret): equal values give
 * equal digests, and a digest tells nothing about the value to someone without the key.
 */
export function outputDigests(
  key: Buffer,
  values: Record<string, unknown>,
): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(values)) {
    out[name] = createHmac('sha256', key).update(canonicalJson(value)).digest('hex');
  }
  return out;
}

/** The values of a state's `outputs` (`{name: {value, type, sensitive}}` → `{name: value}`). */
export function outputValues(outputs: Record<string, unknown> | null): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [name, o] of Object.entries(outputs ?? {})) {
    out[name] = (o as { value?: unknown } | null)?.value;
  }
  return out;
}
