import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  AppConfig,
  DEFAULT_SHUTDOWN_TIMEOUT_SECONDS,
  loadConfig,
} from '../../../src/config/config';
import { K8sObject, schemaProblems } from './k8s-schema';

/**
 * The rules a rendered Statehouse overlay must keep, within one object and across objects.
 * `checkManifests` returns one line per broken rule (empty: all kept). Every container's
 * settings are also run through the server's own `loadConfig`, so a misspelt or invalid
 * setting in a ConfigMap fails here, not at 3 a.m. in a crash loop.
 */

/** After the drain: closing the audit queue and the database. */
export const CLOSE_MARGIN_SECONDS = 10;

/**
 * Secrets the operator creates (they are not in the manifests): name → the keys these
 * manifests use, as documented in deploy/k8s/README.md for the overlay being checked.
 */
export type OperatorSecrets = Map<string, Set<string>>;

interface EnvVar {
  name: string;
  value?: string;
  valueFrom?: {
    secretKeyRef?: { name: string; key: string; optional?: boolean };
    configMapKeyRef?: { name: string; key: string };
  };
}
interface Probe {
  httpGet?: { path?: string; port: string | number; scheme?: string };
}
interface Container {
  name: string;
  image?: string;
  args?: string[];
  command?: string[];
  ports?: { name?: string; containerPort: number }[];
  env?: EnvVar[];
  envFrom?: { configMapRef?: { name: string }; secretRef?: { name: string } }[];
  startupProbe?: Probe;
  readinessProbe?: Probe;
  livenessProbe?: Probe;
  lifecycle?: { preStop?: { sleep?: { seconds: number } } };
  resources?: {
    requests?: Record<string, string | number>;
    limits?: Record<string, string | number>;
  };
  securityContext?: SecurityContext;
  volumeMounts?: { name: string; mountPath: string; readOnly?: boolean; subPath?: string }[];
}
interface SecurityContext {
  runAsNonRoot?: boolean;
  runAsUser?: number;
  allowPrivilegeEscalation?: boolean;
  readOnlyRootFilesystem?: boolean;
  privileged?: boolean;
  capabilities?: { drop?: string[]; add?: string[] };
  seccompProfile?: { type: string };
}
interface Volume {
  name: string;
  emptyDir?: object;
  persistentVolumeClaim?: { claimName: string };
  secret?: { secretName: string; items?: { key: string; path: string }[]; optional?: boolean };
  configMap?: { name: string };
}
interface PodSpec {
  serviceAccountName?: string;
  automountServiceAccountToken?: boolean;
  enableServiceLinks?: boolean;
  terminationGracePeriodSeconds?: number;
  restartPolicy?: string;
  securityContext?: SecurityContext & { fsGroup?: number };
  containers: Container[];
  initContainers?: Container[];
  volumes?: Volume[];
}
interface PodTemplate {
  metadata?: { labels?: Record<string, string> };
  spec: PodSpec;
}
interface Workload extends K8sObject {
  spec: {
    replicas?: number;
    selector?: { matchLabels?: Record<string, string> };
    strategy?: { type?: string; rollingUpdate?: { maxUnavailable?: number | string } };
    backoffLimit?: number;
    template: PodTemplate;
  };
}
type LabelSelector = { matchLabels?: Record<string, string>; matchExpressions?: unknown[] };

const id = (o: K8sObject) => `${o.kind}/${o.metadata.name}`;
const spec = <T>(o: K8sObject) => (o as unknown as { spec: T }).spec;

/** Whether `selector` (matchLabels only; expressions are not used here) selects `labels`. */
export function selects(selector: LabelSelector | undefined, labels: Record<string, string> = {}) {
  if (!selector?.matchLabels || Object.keys(selector.matchLabels).length === 0) return false;
  if (selector.matchExpressions?.length) return false;
  return Object.entries(selector.matchLabels).every(([k, v]) => labels[k] === v);
}

const seconds = (raw: string | undefined, def: number): number => {
  if (raw === undefined) return def;
  const m = /^(\d+)\s*(s|m)?$/.exec(raw.trim());
  return m ? Number(m[1]) * (m[2] === 'm' ? 60 : 1) : NaN;
};

/** The container's settings as the server would see them, and what they decide. */
interface Settings {
  env: Record<string, string>;
  config: AppConfig | undefined;
}

/**
 * Resolves a container's environment (ConfigMaps from the render; Secrets as plausible
 * placeholders; `*_FILE` settings must point into a mounted secret that holds that file) and
 * loads it with the server's own loadConfig.
 */
function settingsOf(
  owner: string,
  pod: PodSpec,
  c: Container,
  configMaps: Map<string, Record<string, string>>,
  problems: string[],
): Settings {
  const env: Record<string, string> = {};
  for (const from of c.envFrom ?? []) {
    if (from.configMapRef) Object.assign(env, configMaps.get(from.configMapRef.name) ?? {});
  }
  for (const e of c.env ?? []) {
    if (e.value !== undefined) env[e.name] = e.value;
    else if (e.valueFrom?.configMapKeyRef) {
      const ref = e.valueFrom.configMapKeyRef;
      env[e.name] = configMaps.get(ref.name)?.[ref.key] ?? '';
    } else if (e.valueFrom?.secretKeyRef) {
      env[e.name] = e.name.startsWith('STATEHOUSE_STS_HMAC_')
        ? randomBytes(32).toString('base64url')
        : e.name === 'DATABASE_URL'
          ? 'postgres://statehouse@db.invalid:5432/statehouse'
          : 'placeholder-secret-value-0123456789abcdef';
    }
  }
  // Files a setting names must be in a mounted volume that provides them.
  const scratch = mkdtempSync(join(tmpdir(), 'statehouse-k8s-settings-'));
  try {
    const loadable: Record<string, string> = { ...env, NODE_ENV: 'production' };
    for (const [name, path] of Object.entries(env)) {
      if (!name.endsWith('_FILE')) continue;
      const mount = (c.volumeMounts ?? []).find((m) => path.startsWith(`${m.mountPath}/`));
      const volume = pod.volumes?.find((v) => v.name === mount?.name);
      const file = mount ? path.slice(mount.mountPath.length + 1) : '';
      const provided =
        volume?.secret &&
        (volume.secret.items === undefined || volume.secret.items.some((i) => i.path === file));
      if (!provided) {
        problems.push(
          `${owner}: ${name}=${path} is not a file of a mounted secret volume (mount it, and list it in the volume's items)`,
        );
      }
      const stand = join(scratch, name);
      if (name === 'STATEHOUSE_TOKENS_PRIVATE_KEY_FILE') {
        const { privateKey } = generateKeyPairSync('ed25519');
        writeFileSync(stand, privateKey.export({ type: 'pkcs8', format: 'pem' }));
      } else writeFileSync(stand, 'placeholder-secret-value-0123456789abcdef');
      loadable[name] = stand;
    }
    try {
      const config = loadConfig(loadable);
      for (const w of config.warnings) {
        if (/unknown setting/.test(w)) problems.push(`${owner}: ${w}`);
      }
      return { env, config };
    } catch (e) {
      problems.push(`${owner}: the server would refuse these settings: ${(e as Error).message}`);
      return { env, config: undefined };
    }
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
}

function podSecurityProblems(owner: string, pod: PodSpec, problems: string[]) {
  const psc = pod.securityContext ?? {};
  if (psc.runAsNonRoot !== true)
    problems.push(`${owner}: pod securityContext.runAsNonRoot must be true`);
  if (psc.runAsUser === 0) problems.push(`${owner}: pod runs as uid 0`);
  if (pod.automountServiceAccountToken !== false) {
    problems.push(
      `${owner}: automountServiceAccountToken must be false (it calls no Kubernetes API)`,
    );
  }
  if (pod.enableServiceLinks !== false) {
    problems.push(
      `${owner}: enableServiceLinks must be false (a Service named statehouse would add STATEHOUSE_* variables)`,
    );
  }
  for (const c of [...(pod.initContainers ?? []), ...pod.containers]) {
    const at = `${owner} container ${c.name}`;
    const sc = c.securityContext ?? {};
    if (sc.allowPrivilegeEscalation !== false)
      problems.push(`${at}: allowPrivilegeEscalation must be false`);
    if (sc.readOnlyRootFilesystem !== true)
      problems.push(`${at}: readOnlyRootFilesystem must be true`);
    if (sc.privileged) problems.push(`${at}: must not be privileged`);
    if (!(sc.capabilities?.drop ?? []).includes('ALL'))
      problems.push(`${at}: capabilities must drop ALL`);
    if ((sc.capabilities?.add ?? []).length > 0) problems.push(`${at}: must add no capabilities`);
    if ((sc.seccompProfile ?? psc.seccompProfile)?.type !== 'RuntimeDefault') {
      problems.push(`${at}: seccompProfile must be RuntimeDefault`);
    }
    if (sc.runAsNonRoot === false || sc.runAsUser === 0) problems.push(`${at}: runs as root`);
    if (!c.image || /:latest$/.test(c.image) || !/[:@]/.test(c.image.split('/').pop() ?? '')) {
      problems.push(`${at}: image ${c.image ?? '(none)'} must name a version tag or digest`);
    }
    const req = c.resources?.requests ?? {};
    const lim = c.resources?.limits ?? {};
    if (req.cpu === undefined || req.memory === undefined) {
      problems.push(`${at}: resources.requests must set cpu and memory`);
    }
    if (lim.memory === undefined) problems.push(`${at}: resources.limits must set memory`);
  }
}

/** Writable volumes a read-only root filesystem needs: the data dir and /tmp. */
function writableMountProblems(
  owner: string,
  pod: PodSpec,
  c: Container,
  s: Settings,
  problems: string[],
) {
  const need = ['/tmp', ...(s.config ? [s.config.dataDir] : [])];
  for (const path of need) {
    const mount = (c.volumeMounts ?? []).find((m) => m.mountPath === path);
    const volume = pod.volumes?.find((v) => v.name === mount?.name);
    if (!mount || mount.readOnly || !(volume?.emptyDir || volume?.persistentVolumeClaim)) {
      problems.push(
        `${owner}: ${path} must be a writable volume (emptyDir or a PersistentVolumeClaim)`,
      );
    }
  }
}

function portNamed(containers: Container[], port: string | number | undefined): boolean {
  return containers.some((c) =>
    (c.ports ?? []).some((p) =>
      typeof port === 'string' ? p.name === port : p.containerPort === port,
    ),
  );
}

export function checkManifests(objects: K8sObject[], operatorSecrets: OperatorSecrets): string[] {
  const problems: string[] = [];
  for (const o of objects) problems.push(...schemaProblems(o));

  const of = (kind: string) => objects.filter((o) => o.kind === kind);
  const names = (kind: string) => new Set(of(kind).map((o) => o.metadata.name));
  const configMaps = new Map(
    of('ConfigMap').map((o) => [
      o.metadata.name,
      (o as unknown as { data?: Record<string, string> }).data ?? {},
    ]),
  );
  const deployments = of('Deployment') as Workload[];
  const jobs = of('Job') as Workload[];
  const hpas = of('HorizontalPodAutoscaler');
  const pdbs = of('PodDisruptionBudget');
  const secretsHere = names('Secret');

  const server = deployments.find((d) => d.metadata.name === 'statehouse');
  if (!server) return [...problems, 'no Deployment named statehouse'];
  const serverPod = server.spec.template;
  const serverContainer = serverPod.spec.containers.find((c) => c.name === 'statehouse');
  if (!serverContainer) return [...problems, `${id(server)}: no container named statehouse`];

  // References every workload makes: ConfigMaps, Secrets, the ServiceAccount, claims.
  const referencedSecretKeys = new Set<string>();
  for (const w of [...deployments, ...jobs]) {
    const pod = w.spec.template.spec;
    if (pod.serviceAccountName && !names('ServiceAccount').has(pod.serviceAccountName)) {
      problems.push(`${id(w)}: ServiceAccount ${pod.serviceAccountName} is not in the manifests`);
    }
    const secretKey = (owner: string, name: string, key: string | undefined) => {
      if (secretsHere.has(name)) return;
      const documented = operatorSecrets.get(name);
      if (!documented) {
        problems.push(
          `${owner}: Secret ${name} is neither in the manifests nor documented as operator-provided`,
        );
      } else if (key !== undefined) {
        referencedSecretKeys.add(`${name}/${key}`);
        if (!documented.has(key)) {
          problems.push(
            `${owner}: key ${key} of Secret ${name} is not documented in deploy/k8s/README.md`,
          );
        }
      }
    };
    for (const c of [...(pod.initContainers ?? []), ...pod.containers]) {
      for (const from of c.envFrom ?? []) {
        if (from.configMapRef && !configMaps.has(from.configMapRef.name)) {
          problems.push(`${id(w)}: ConfigMap ${from.configMapRef.name} is not in the manifests`);
        }
        if (from.secretRef) secretKey(id(w), from.secretRef.name, undefined);
      }
      for (const e of c.env ?? []) {
        const cm = e.valueFrom?.configMapKeyRef;
        if (cm && configMaps.get(cm.name)?.[cm.key] === undefined) {
          problems.push(
            `${id(w)}: ${e.name} names ConfigMap ${cm.name} key ${cm.key}, which is not there`,
          );
        }
        const sk = e.valueFrom?.secretKeyRef;
        if (sk) secretKey(id(w), sk.name, sk.key);
      }
    }
    for (const v of pod.volumes ?? []) {
      if (v.secret) {
        if (!v.secret.items) secretKey(id(w), v.secret.secretName, undefined);
        for (const i of v.secret.items ?? []) secretKey(id(w), v.secret.secretName, i.key);
      }
      if (v.configMap && !configMaps.has(v.configMap.name)) {
        problems.push(`${id(w)}: ConfigMap ${v.configMap.name} is not in the manifests`);
      }
      if (
        v.persistentVolumeClaim &&
        !names('PersistentVolumeClaim').has(v.persistentVolumeClaim.claimName)
      ) {
        problems.push(
          `${id(w)}: PersistentVolumeClaim ${v.persistentVolumeClaim.claimName} is not in the manifests`,
        );
      }
    }
    for (const c of pod.containers) {
      for (const m of c.volumeMounts ?? []) {
        if (!pod.volumes?.some((v) => v.name === m.name)) {
          problems.push(
            `${id(w)} container ${c.name}: mounts volume ${m.name}, which the pod does not have`,
          );
        }
      }
    }
    podSecurityProblems(id(w), pod, problems);
  }
  // Every key documented for this render is used by it (the documentation does not drift).
  for (const [name, keys] of operatorSecrets) {
    for (const key of keys) {
      if (!referencedSecretKeys.has(`${name}/${key}`)) {
        problems.push(
          `key ${key} of Secret ${name} is documented for these manifests but not used by them`,
        );
      }
    }
  }

  // The server: its settings, probes, rollout, shutdown.
  const settings = settingsOf(id(server), serverPod.spec, serverContainer, configMaps, problems);
  const embedded = settings.config !== undefined && settings.config.databaseUrl === undefined;
  writableMountProblems(id(server), serverPod.spec, serverContainer, settings, problems);
  const podLabels = serverPod.metadata?.labels ?? {};
  if (!selects(server.spec.selector, podLabels)) {
    problems.push(`${id(server)}: spec.selector does not select its own pod template`);
  }
  const cfg = settings.config;
  if (cfg) {
    const http = (serverContainer.ports ?? []).find((p) => p.name === 'http');
    if (!http || http.containerPort !== cfg.port) {
      problems.push(`${id(server)}: container port "http" must be the server's PORT (${cfg.port})`);
    }
    if (cfg.host !== '0.0.0.0' && cfg.host !== '::') {
      problems.push(
        `${id(server)}: STATEHOUSE_HOST=${cfg.host} is unreachable for the kubelet and the Service`,
      );
    }
  }
  const scheme = cfg?.tls ? 'HTTPS' : 'HTTP';
  const probes: [keyof Container, string][] = [
    ['startupProbe', '/healthz'],
    ['readinessProbe', '/readyz'],
    ['livenessProbe', '/healthz'],
  ];
  for (const [kind, path] of probes) {
    const probe = serverContainer[kind] as Probe | undefined;
    if (!probe?.httpGet) {
      problems.push(`${id(server)}: ${kind} must be an httpGet of ${path}`);
      continue;
    }
    if (probe.httpGet.path !== path) {
      problems.push(`${id(server)}: ${kind} must ask ${path} (got ${probe.httpGet.path ?? '/'})`);
    }
    if (!portNamed(serverPod.spec.containers, probe.httpGet.port)) {
      problems.push(`${id(server)}: ${kind} port ${probe.httpGet.port} is no container port`);
    }
    if ((probe.httpGet.scheme ?? 'HTTP') !== scheme) {
      problems.push(
        `${id(server)}: ${kind} scheme must be ${scheme} (TLS ${cfg?.tls ? 'on' : 'off'})`,
      );
    }
  }
  const drain = seconds(settings.env.STATEHOUSE_SHUTDOWN_TIMEOUT, DEFAULT_SHUTDOWN_TIMEOUT_SECONDS);
  const preStop = serverContainer.lifecycle?.preStop?.sleep?.seconds ?? 0;
  const grace = serverPod.spec.terminationGracePeriodSeconds ?? 30;
  const wanted = preStop + drain + CLOSE_MARGIN_SECONDS;
  if (!(grace >= wanted && grace <= wanted + 30)) {
    problems.push(
      `${id(server)}: terminationGracePeriodSeconds ${grace} does not match the shutdown: preStop ${preStop} s + drain ${drain} s (STATEHOUSE_SHUTDOWN_TIMEOUT) + ${CLOSE_MARGIN_SECONDS} s = ${wanted} s`,
    );
  }

  const replicas = server.spec.replicas ?? 1;
  const hpa = hpas.find((h) => {
    const ref = spec<{ scaleTargetRef: { kind: string; name: string } }>(h).scaleTargetRef;
    return ref.kind === 'Deployment' && ref.name === server.metadata.name;
  });
  const strategy = server.spec.strategy?.type ?? 'RollingUpdate';
  if (embedded) {
    // One process per embedded data directory.
    if (replicas !== 1)
      problems.push(
        `${id(server)}: the embedded database serves one replica (replicas ${replicas})`,
      );
    if (strategy !== 'Recreate') {
      problems.push(
        `${id(server)}: with the embedded database the strategy must be Recreate (the new pod cannot open the data dir while the old one holds it)`,
      );
    }
    if (hpa) problems.push(`${id(hpa)}: no autoscaler on the embedded database (one replica)`);
    const data = serverContainer.volumeMounts?.find((m) => m.mountPath === cfg?.dataDir);
    const volume = serverPod.spec.volumes?.find((v) => v.name === data?.name);
    if (!volume?.persistentVolumeClaim) {
      problems.push(`${id(server)}: the embedded database must live on a PersistentVolumeClaim`);
    }
  } else {
    if (replicas < 2)
      problems.push(`${id(server)}: run at least 2 replicas on PostgreSQL (got ${replicas})`);
    if (strategy !== 'RollingUpdate' || server.spec.strategy?.rollingUpdate?.maxUnavailable !== 0) {
      problems.push(`${id(server)}: roll out with RollingUpdate and maxUnavailable: 0`);
    }
    if (cfg?.storage.driver === 'fs') {
      problems.push(
        `${id(server)}: STATEHOUSE_STORAGE=fs on several replicas needs a volume they share: use s3 or postgres`,
      );
    }
  }
  if (hpa) {
    const h = spec<{
      minReplicas?: number;
      maxReplicas: number;
      metrics?: { type: string; resource?: { name: string } }[];
    }>(hpa);
    if ((h.minReplicas ?? 1) < 2) problems.push(`${id(hpa)}: minReplicas must be at least 2`);
    if (h.maxReplicas < (h.minReplicas ?? 1))
      problems.push(`${id(hpa)}: maxReplicas is below minReplicas`);
    if (replicas < (h.minReplicas ?? 1) || replicas > h.maxReplicas) {
      problems.push(
        `${id(hpa)}: the Deployment's replicas (${replicas}) lie outside ${h.minReplicas}..${h.maxReplicas}`,
      );
    }
    for (const m of h.metrics ?? []) {
      const r = m.resource?.name;
      if (
        m.type === 'Resource' &&
        r &&
        serverPod.spec.containers.some((c) => c.resources?.requests?.[r] === undefined)
      ) {
        problems.push(`${id(hpa)}: scales on ${r} utilisation, but a container requests no ${r}`);
      }
    }
  }
  for (const h of hpas) {
    const ref = spec<{ scaleTargetRef: { kind: string; name: string } }>(h).scaleTargetRef;
    if (!objects.some((o) => o.kind === ref.kind && o.metadata.name === ref.name)) {
      problems.push(`${id(h)}: scales ${ref.kind}/${ref.name}, which is not in the manifests`);
    }
  }

  // Selectors and ports across objects.
  const jobPodLabels = jobs.map((j) => j.spec.template.metadata?.labels ?? {});
  for (const svc of of('Service')) {
    const s = spec<{
      selector?: Record<string, string>;
      ports?: { name?: string; targetPort?: string | number; port: number }[];
    }>(svc);
    const selector = { matchLabels: s.selector };
    if (!selects(selector, podLabels))
      problems.push(`${id(svc)}: selector does not match the server's pod labels`);
    if (jobPodLabels.some((l) => selects(selector, l)))
      problems.push(`${id(svc)}: selector also matches the migrations Job's pods`);
    for (const p of s.ports ?? []) {
      if (!portNamed(serverPod.spec.containers, p.targetPort ?? p.port)) {
        problems.push(
          `${id(svc)}: port ${p.name ?? p.port} targets ${p.targetPort ?? p.port}, which is no container port`,
        );
      }
    }
  }
  for (const pdb of pdbs) {
    const p = spec<{
      selector?: LabelSelector;
      minAvailable?: number | string;
      maxUnavailable?: number | string;
    }>(pdb);
    if (!selects(p.selector, podLabels))
      problems.push(`${id(pdb)}: selector does not match the server's pod labels`);
    if (jobPodLabels.some((l) => selects(p.selector, l)))
      problems.push(`${id(pdb)}: selector also matches the migrations Job's pods`);
    const least = Math.max(
      replicas,
      hpa ? (spec<{ minReplicas?: number }>(hpa).minReplicas ?? 1) : 0,
    );
    if (least < 2 || embedded) {
      problems.push(
        `${id(pdb)}: a PodDisruptionBudget on a single replica blocks every node drain`,
      );
    } else if (typeof p.minAvailable === 'number' && p.minAvailable >= least) {
      problems.push(
        `${id(pdb)}: minAvailable ${p.minAvailable} leaves no disruption with ${least} replicas`,
      );
    }
  }
  for (const sm of of('ServiceMonitor')) {
    const m = spec<{ selector?: LabelSelector; endpoints?: { port?: string; path?: string }[] }>(
      sm,
    );
    const services = of('Service').filter((s) => selects(m.selector, s.metadata.labels));
    if (services.length === 0) problems.push(`${id(sm)}: selector matches no Service's labels`);
    for (const e of m.endpoints ?? []) {
      const served = services.some((s) =>
        (spec<{ ports?: { name?: string }[] }>(s).ports ?? []).some((p) => p.name === e.port),
      );
      if (!served)
        problems.push(
          `${id(sm)}: endpoint port ${e.port ?? '(none)'} is no port name of the selected Service`,
        );
      if (e.path !== '/metrics') problems.push(`${id(sm)}: endpoint path must be /metrics`);
    }
  }
  for (const np of of('NetworkPolicy')) {
    const n = spec<{
      podSelector?: LabelSelector;
      policyTypes?: string[];
      ingress?: { ports?: { port?: string | number }[] }[];
    }>(np);
    if (!selects(n.podSelector, podLabels))
      problems.push(`${id(np)}: podSelector does not select the server's pods`);
    for (const t of ['Ingress', 'Egress']) {
      if (!(n.policyTypes ?? []).includes(t))
        problems.push(`${id(np)}: policyTypes must include ${t}`);
    }
    for (const rule of n.ingress ?? []) {
      for (const p of rule.ports ?? []) {
        if (!portNamed(serverPod.spec.containers, p.port)) {
          problems.push(`${id(np)}: ingress port ${p.port} is no container port of the server`);
        }
      }
    }
  }

  // An ingress (ingress-nginx): the path as sent, streamed bodies, states over 1m, every
  // backend a port of a Service here, and the replicas told to believe its X-Forwarded-For.
  for (const ing of of('Ingress')) {
    const annotations = ing.metadata.annotations ?? {};
    const nginx = (name: string) => annotations[`nginx.ingress.kubernetes.io/${name}`];
    if (nginx('rewrite-target') !== undefined || nginx('use-regex') === 'true')
      problems.push(`${id(ing)}: no rewrite-target or regex paths (they change the signed path)`);
    if (nginx('proxy-request-buffering') !== 'off')
      problems.push(`${id(ing)}: set nginx.ingress.kubernetes.io/proxy-request-buffering: "off"`);
    if (nginx('proxy-body-size') === undefined)
      problems.push(`${id(ing)}: set nginx.ingress.kubernetes.io/proxy-body-size (default 1m)`);
    type Backend = { service?: { name: string; port?: { name?: string; number?: number } } };
    const i = spec<{
      defaultBackend?: Backend;
      rules?: { http?: { paths?: { backend: Backend }[] } }[];
    }>(ing);
    const backends = [
      ...(i.defaultBackend ? [i.defaultBackend] : []),
      ...(i.rules ?? []).flatMap((r) => (r.http?.paths ?? []).map((p) => p.backend)),
    ];
    for (const b of backends) {
      const svc = of('Service').find((s) => s.metadata.name === b.service?.name);
      const port = b.service?.port;
      const served = (
        svc ? (spec<{ ports?: { name?: string; port: number }[] }>(svc).ports ?? []) : []
      ).some((p) => (port?.name !== undefined ? p.name === port.name : p.port === port?.number));
      if (!served)
        problems.push(
          `${id(ing)}: backend ${b.service?.name ?? '(none)'}:${port?.name ?? port?.number ?? '(none)'} is no port of a Service here`,
        );
    }
    if ((settings.config?.trustedProxies ?? []).length === 0)
      problems.push(`${id(ing)}: set STATEHOUSE_TRUSTED_PROXIES to the ingress controller's pods`);
  }

  // The migrations Job: the same image and settings as the server.
  for (const job of jobs) {
    const pod = job.spec.template.spec;
    const c = pod.containers[0];
    if (!c || JSON.stringify(c.args ?? c.command) !== JSON.stringify(['migrate'])) {
      problems.push(`${id(job)}: the only Job is the migrations Job and runs args ["migrate"]`);
      continue;
    }
    if (embedded)
      problems.push(
        `${id(job)}: no migrations Job on the embedded database (the server migrates its own)`,
      );
    const same = (what: string, a: unknown, b: unknown) => {
      if (JSON.stringify(a) !== JSON.stringify(b))
        problems.push(`${id(job)}: ${what} differs from the server's`);
    };
    same('image', c.image, serverContainer.image);
    same('envFrom', c.envFrom, serverContainer.envFrom);
    same('env', c.env, serverContainer.env);
    const secretVolumes = (p: PodSpec) => (p.volumes ?? []).filter((v) => v.secret);
    same('secret volumes', secretVolumes(pod), secretVolumes(serverPod.spec));
    same('serviceAccountName', pod.serviceAccountName, serverPod.spec.serviceAccountName);
    if (pod.restartPolicy !== 'Never' && pod.restartPolicy !== 'OnFailure') {
      problems.push(`${id(job)}: restartPolicy must be Never or OnFailure`);
    }
    if (job.spec.backoffLimit === undefined) problems.push(`${id(job)}: set backoffLimit`);
    const jobSettings = settingsOf(id(job), pod, c, configMaps, problems);
    writableMountProblems(id(job), pod, c, jobSettings, problems);
  }
  if (!embedded && jobs.length === 0)
    problems.push('no migrations Job (statehouse migrate) on PostgreSQL');
  // Who migrates: the Job on PostgreSQL (replicas wait for it, not ready), the one server on
  // the embedded database (nothing else can open it).
  if (cfg && !embedded && jobs.length > 0 && cfg.migrate) {
    problems.push(
      `${id(server)}: set STATEHOUSE_MIGRATE=false: the migrations Job migrates, and the rollout's replicas wait for it`,
    );
  }
  if (cfg && embedded && !cfg.migrate) {
    problems.push(
      `${id(server)}: STATEHOUSE_MIGRATE must not be false on the embedded database: no Job can open it, so the server would never start`,
    );
  }
  return problems;
}
