import { Model } from '@kubernetes-models/base';
import { ServiceMonitor } from '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1';
import { Deployment } from 'kubernetes-models/apps/v1';
import { HorizontalPodAutoscaler } from 'kubernetes-models/autoscaling/v2';
import { Job } from 'kubernetes-models/batch/v1';
import { Ingress, NetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1';
import {
  ConfigMap,
  Namespace,
  PersistentVolumeClaim,
  Secret,
  Service,
  ServiceAccount,
} from 'kubernetes-models/v1';

/**
 * Schema checks of one rendered object: its apiVersion is a current one for its kind, it passes
 * the Kubernetes OpenAPI schema that `kubernetes-models` ships (types, required fields), and it
 * has no field that schema does not know.
 *
 * `kubernetes-models` itself accepts unknown fields (`spec.replica` passes) and still models
 * removed APIs (`policy/v1beta1`, `autoscaling/v2beta2`), so: an allow-list of the apiVersions
 * current in Kubernetes 1.32, and a strict field check. The shipped schemas are compiled
 * validators, not JSON documents, but a compiled validator reads every property its schema
 * names (and walks every key of a map such as `labels`): running it on a proxy that records
 * the keys read, any key of the object it never read is a field the schema does not have.
 */

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- every model takes its own shape
type ModelClass = { new (data: any): Model<unknown> };

/** The apiVersion allowed for each kind (current, not deprecated, in Kubernetes 1.32). */
export const CURRENT_API: Record<string, { apiVersion: string; model: ModelClass }> = {
  Namespace: { apiVersion: 'v1', model: Namespace },
  ServiceAccount: { apiVersion: 'v1', model: ServiceAccount },
  ConfigMap: { apiVersion: 'v1', model: ConfigMap },
  Secret: { apiVersion: 'v1', model: Secret },
  Service: { apiVersion: 'v1', model: Service },
  PersistentVolumeClaim: { apiVersion: 'v1', model: PersistentVolumeClaim },
  Deployment: { apiVersion: 'apps/v1', model: Deployment },
  Job: { apiVersion: 'batch/v1', model: Job },
  PodDisruptionBudget: { apiVersion: 'policy/v1', model: PodDisruptionBudget },
  HorizontalPodAutoscaler: { apiVersion: 'autoscaling/v2', model: HorizontalPodAutoscaler },
  NetworkPolicy: { apiVersion: 'networking.k8s.io/v1', model: NetworkPolicy },
  Ingress: { apiVersion: 'networking.k8s.io/v1', model: Ingress },
  ServiceMonitor: { apiVersion: 'monitoring.coreos.com/v1', model: ServiceMonitor },
};

/** Wraps `value` so that every key read on it (and below it) is recorded per JSON path. */
function recording(value: unknown, path: string, seen: Map<string, Set<string>>): unknown {
  if (value === null || typeof value !== 'object') return value;
  const keys = new Set<string>();
  seen.set(path, keys);
  const children = new Map<string, unknown>();
  return new Proxy(value, {
    get(target, key, receiver) {
      const v: unknown = Reflect.get(target, key, receiver);
      if (typeof key !== 'string' || !Object.prototype.hasOwnProperty.call(target, key)) {
        if (typeof key === 'string') keys.add(key);
        return v;
      }
      keys.add(key);
      if (!children.has(key)) children.set(key, recording(v, `${path}/${key}`, seen));
      return children.get(key);
    },
    ownKeys(target) {
      const own = Reflect.ownKeys(target);
      for (const k of own) if (typeof k === 'string') keys.add(k);
      return own;
    },
  });
}

/** Keys present in `value` (at any depth) that the validator never read, as JSON paths. */
function unread(value: unknown, path: string, seen: Map<string, Set<string>>): string[] {
  if (value === null || typeof value !== 'object') return [];
  const keys = seen.get(path);
  const out: string[] = [];
  for (const [k, v] of Object.entries(value)) {
    // An array index is never a field: an element the schema does not describe is not walked.
    if (Array.isArray(value)) {
      if (keys?.has(k)) out.push(...unread(v, `${path}/${k}`, seen));
    } else if (!keys?.has(k)) out.push(`${path}/${k}`);
    else out.push(...unread(v, `${path}/${k}`, seen));
  }
  return out;
}

export interface K8sObject {
  apiVersion: string;
  kind: string;
  metadata: {
    name: string;
    namespace?: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
  };
  [field: string]: unknown;
}

/** Problems with one object's apiVersion, schema and fields, each prefixed `Kind/name:`. */
export function schemaProblems(obj: K8sObject): string[] {
  const id = `${obj.kind}/${obj.metadata?.name ?? '?'}`;
  const api = CURRENT_API[obj.kind];
  if (!api) return [`${id}: kind ${obj.kind} is not one these manifests may use`];
  if (obj.apiVersion !== api.apiVersion) {
    return [
      `${id}: apiVersion ${obj.apiVersion} is not current for ${obj.kind} (use ${api.apiVersion})`,
    ];
  }
  const problems: string[] = [];
  const seen = new Map<string, Set<string>>();
  const model = new api.model(obj);
  try {
    model.validate.call(recording(obj, '', seen));
  } catch (e) {
    problems.push(`${id}: ${(e as Error).message}`);
  }
  for (const path of unread(obj, '', seen)) {
    problems.push(`${id}: unknown field ${path.slice(1).replace(/\//g, '.')}`);
  }
  return problems;
}
