import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { parseAllDocuments } from 'yaml';
import { K8sObject } from './k8s-schema';
import { OperatorSecrets } from './k8s-rules';

/**
 * `kubectl kustomize` renders offline. Without kubectl (with kustomize v5) the deployment tests
 * fail — loudly, never skipped: a manifest nobody rendered is a manifest nobody checked.
 */
export function kustomizeVersion(): string {
  let out: string;
  try {
    out = execFileSync('kubectl', ['version', '--client', '-o', 'json'], { encoding: 'utf8' });
  } catch (e) {
    throw new Error(
      `kubectl is needed to render the kustomize overlays and is not usable here (${(e as Error).message.split('\n')[0]}): ` +
        'install kubectl 1.27 or later (.ci/run does with CI=true)',
    );
  }
  const version = (JSON.parse(out) as { kustomizeVersion?: string }).kustomizeVersion ?? '';
  if (!/^v[5-9]\./.test(version)) {
    throw new Error(
      `kubectl's kustomize is ${version || 'missing'}: kustomize v5 (kubectl 1.27+) is needed`,
    );
  }
  return version;
}

/** The objects an overlay (or the base) renders to. */
export function render(dir: string): K8sObject[] {
  const yaml = execFileSync('kubectl', ['kustomize', dir], { encoding: 'utf8' });
  return parseAllDocuments(yaml)
    .map((d) => d.toJSON() as K8sObject | null)
    .filter((o): o is K8sObject => o !== null);
}

/**
 * The table of operator-provided Secret keys in deploy/k8s/README.md: for the given render
 * (`base`, `dev`, `prod`), Secret name → keys documented as used there.
 */
export function documentedSecrets(readmePath: string, render: string): OperatorSecrets {
  const out: OperatorSecrets = new Map();
  const row = /^\|\s*`([^`]+)`\s*\|\s*`([^`]+)`\s*\|.*\|\s*([a-z, ]+?)\s*\|\s*$/;
  for (const line of readFileSync(readmePath, 'utf8').split('\n')) {
    const m = row.exec(line);
    if (!m) continue;
    const [, secret, key, renders] = m;
    if (
      !renders
        .split(',')
        .map((r) => r.trim())
        .includes(render)
    )
      continue;
    if (!out.has(secret)) out.set(secret, new Set());
    out.get(secret)?.add(key);
  }
  return out;
}
