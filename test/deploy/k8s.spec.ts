/**
 * deploy/k8s: every kustomize render (the base and the dev and prod overlays) through
 * `kubectl kustomize`, each object checked against the Kubernetes schemas (current apiVersions
 * only, no unknown fields) and the deployment rules within and across objects
 * (test/deploy/support/k8s-rules.ts). Then the checker itself is shown to refuse manifests that
 * break each kind of rule. Without kubectl these tests fail, never skip.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT } from '../support/paths';
import { checkManifests } from './support/k8s-rules';
import { K8sObject } from './support/k8s-schema';
import { documentedSecrets, kustomizeVersion, render } from './support/kustomize';

const K8S = join(ROOT, 'deploy', 'k8s');
const README = join(K8S, 'README.md');
const RENDERS = { base: 'base', dev: 'overlays/dev', prod: 'overlays/prod' } as const;
type RenderName = keyof typeof RENDERS;

const rendered = new Map<RenderName, K8sObject[]>();

beforeAll(() => {
  kustomizeVersion(); // throws, failing every test below, when kubectl cannot render
  for (const [name, dir] of Object.entries(RENDERS)) {
    rendered.set(name as RenderName, render(join(K8S, dir)));
  }
});

/** A deep copy of a render, to break. */
const copy = (name: RenderName): K8sObject[] => structuredClone(rendered.get(name) ?? []);
const find = (objects: K8sObject[], kind: string, name = 'statehouse') => {
  const o = objects.find((x) => x.kind === kind && x.metadata.name.startsWith(name));
  if (!o) throw new Error(`no ${kind}/${name}`);
  return o as K8sObject & Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
};
const check = (name: RenderName, objects: K8sObject[]) =>
  checkManifests(objects, documentedSecrets(README, name));

describe.each(Object.keys(RENDERS) as RenderName[])('kustomize render %s', (name) => {
  it('passes the Kubernetes schemas and every deployment rule', () => {
    expect(check(name, copy(name))).toEqual([]);
  });

  it('puts every object in one namespace (the overlays) and labels it app.kubernetes.io/name', () => {
    const objects = copy(name);
    const namespaces = new Set(
      objects.filter((o) => o.kind !== 'Namespace').map((o) => o.metadata.namespace),
    );
    expect([...namespaces]).toEqual([
      { base: undefined, dev: 'statehouse-dev', prod: 'statehouse' }[name],
    ]);
    for (const o of objects.filter((x) => x.kind !== 'ConfigMap' && x.kind !== 'Namespace')) {
      expect({
        id: `${o.kind}/${o.metadata.name}`,
        label: o.metadata.labels?.['app.kubernetes.io/name'],
      }).toEqual({
        id: `${o.kind}/${o.metadata.name}`,
        label: 'statehouse',
      });
    }
  });
});

describe('what each overlay holds', () => {
  const kinds = (name: RenderName) =>
    copy(name)
      .map((o) => o.kind)
      .sort();

  it('prod: PostgreSQL replicas, blobs in S3, the migrations Job, PDB, autoscaler, ServiceMonitor, an ingress-nginx Ingress', () => {
    expect(kinds('prod')).toEqual([
      'ConfigMap',
      'Deployment',
      'HorizontalPodAutoscaler',
      'Ingress',
      'Job',
      'Namespace',
      'NetworkPolicy',
      'PodDisruptionBudget',
      'Service',
      'ServiceAccount',
      'ServiceMonitor',
    ]);
    const objects = copy('prod');
    const settings = find(objects, 'ConfigMap', 'statehouse-config').data;
    expect(settings).toMatchObject({
      // The Job migrates; the replicas wait for it.
      STATEHOUSE_MIGRATE: 'false',
      STATEHOUSE_STORAGE: 's3',
      STATEHOUSE_STORAGE_S3_BUCKET: expect.any(String),
    });
    const server = find(objects, 'Deployment').spec;
    expect(server.replicas).toBe(2);
    expect(server.strategy).toEqual({
      type: 'RollingUpdate',
      rollingUpdate: { maxSurge: 1, maxUnavailable: 0 },
    });
    const env = server.template.spec.containers[0].env as { name: string }[];
    expect(env.map((e) => e.name)).toEqual(
      expect.arrayContaining([
        'DATABASE_URL',
        'STATEHOUSE_TOKENS_PRIVATE_KEY_FILE',
        'STATEHOUSE_STS_HMAC_K1',
      ]),
    );
    expect(
      find(objects, 'Job', 'statehouse-migrate').spec.template.spec.containers[0].args,
    ).toEqual(['migrate']);
  });

  it('dev: one embedded replica on a claim, Recreate, and no PDB, autoscaler, Job or ServiceMonitor', () => {
    expect(kinds('dev')).toEqual([
      'ConfigMap',
      'Deployment',
      'Namespace',
      'NetworkPolicy',
      'PersistentVolumeClaim',
      'Service',
      'ServiceAccount',
    ]);
    expect(find(copy('dev'), 'ConfigMap', 'statehouse-config').data.STATEHOUSE_MIGRATE).toBe(
      'true',
    );
    const server = find(copy('dev'), 'Deployment').spec;
    expect(server.replicas).toBe(1);
    expect(server.strategy).toEqual({ type: 'Recreate' });
    const c = server.template.spec.containers[0];
    expect((c.env as { name: string }[]).map((e) => e.name)).not.toContain('DATABASE_URL');
    expect(server.template.spec.volumes).toContainEqual({
      name: 'data',
      persistentVolumeClaim: { claimName: 'statehouse-data' },
    });
  });
});

describe('the manifest checker refuses', () => {
  type Case = [string, RenderName, (objects: K8sObject[]) => void, RegExp];
  const deployment = (o: K8sObject[]) => find(o, 'Deployment').spec;
  const container = (o: K8sObject[]) => deployment(o).template.spec.containers[0];
  const ingressAnnotations = (o: K8sObject[]) =>
    find(o, 'Ingress').metadata.annotations as Record<string, string>;
  const cases: Case[] = [
    [
      'an unknown field (spec.replica)',
      'prod',
      (o) => (deployment(o).replica = 3),
      /Deployment\/statehouse: unknown field spec\.replica$/,
    ],
    [
      'an unknown field deep in a container',
      'prod',
      (o) => (container(o).ports[0].hostPorts = 80),
      /unknown field spec\.template\.spec\.containers\.0\.ports\.0\.hostPorts/,
    ],
    [
      'a wrong type',
      'prod',
      (o) => (deployment(o).replicas = '2'),
      /data\/spec\/replicas must be integer/,
    ],
    [
      'a missing required field',
      'prod',
      (o) => delete container(o).name,
      /containers\/0 must have required property name/,
    ],
    [
      'a removed apiVersion (policy/v1beta1)',
      'prod',
      (o) => (find(o, 'PodDisruptionBudget').apiVersion = 'policy/v1beta1'),
      /apiVersion policy\/v1beta1 is not current for PodDisruptionBudget \(use policy\/v1\)/,
    ],
    [
      'a beta autoscaler API',
      'prod',
      (o) => (find(o, 'HorizontalPodAutoscaler').apiVersion = 'autoscaling/v2beta2'),
      /apiVersion autoscaling\/v2beta2 is not current/,
    ],
    [
      'a Service selecting no server pod',
      'prod',
      (o) => (find(o, 'Service').spec.selector['app.kubernetes.io/component'] = 'web'),
      /Service\/statehouse: selector does not match the server's pod labels/,
    ],
    [
      'a Service that also selects the migrations pods',
      'prod',
      (o) => delete find(o, 'Service').spec.selector['app.kubernetes.io/component'],
      /Service\/statehouse: selector also matches the migrations Job's pods/,
    ],
    [
      'a Service port naming no container port',
      'prod',
      (o) => (find(o, 'Service').spec.ports[0].targetPort = 'web'),
      /port http targets web, which is no container port/,
    ],
    [
      'a PDB selecting no server pod',
      'prod',
      (o) =>
        (find(o, 'PodDisruptionBudget').spec.selector.matchLabels['app.kubernetes.io/name'] =
          'other'),
      /PodDisruptionBudget\/statehouse: selector does not match/,
    ],
    [
      'a probe on a port that does not exist',
      'prod',
      (o) => (container(o).readinessProbe.httpGet.port = 'web'),
      /readinessProbe port web is no container port/,
    ],
    [
      'liveness on /readyz (a database outage would restart every pod)',
      'prod',
      (o) => (container(o).livenessProbe.httpGet.path = '/readyz'),
      /livenessProbe must ask \/healthz/,
    ],
    [
      'a rollout that may take a replica down',
      'prod',
      (o) => (deployment(o).strategy.rollingUpdate.maxUnavailable = 1),
      /maxUnavailable: 0/,
    ],
    [
      'a grace period shorter than the drain',
      'prod',
      (o) => (deployment(o).template.spec.terminationGracePeriodSeconds = 30),
      /terminationGracePeriodSeconds 30 does not match the shutdown: preStop 5 s \+ drain 30 s \(STATEHOUSE_SHUTDOWN_TIMEOUT\) \+ 10 s = 45 s/,
    ],
    [
      'a longer drain without a longer grace period',
      'prod',
      (o) => (find(o, 'ConfigMap', 'statehouse-config').data.STATEHOUSE_SHUTDOWN_TIMEOUT = '60s'),
      /drain 60 s/,
    ],
    [
      'a writable root filesystem',
      'prod',
      (o) => (container(o).securityContext.readOnlyRootFilesystem = false),
      /container statehouse: readOnlyRootFilesystem must be true/,
    ],
    [
      'service links (STATEHOUSE_* variables from the Service)',
      'prod',
      (o) => delete deployment(o).template.spec.enableServiceLinks,
      /enableServiceLinks must be false/,
    ],
    [
      'a mounted service-account token',
      'prod',
      (o) => (deployment(o).template.spec.automountServiceAccountToken = true),
      /automountServiceAccountToken must be false/,
    ],
    [
      'an image without a version',
      'prod',
      (o) => (container(o).image = 'statehouse'),
      /must name a version tag/,
    ],
    [
      'a misspelt setting',
      'prod',
      (o) => (find(o, 'ConfigMap', 'statehouse-config').data.STATEHOUSE_STORAGE_S3_BUKET = 'x'),
      /unknown setting STATEHOUSE_STORAGE_S3_BUKET is ignored/,
    ],
    [
      'a setting the server would refuse',
      'prod',
      (o) => (find(o, 'ConfigMap', 'statehouse-config').data.STATEHOUSE_STORAGE = 'ftp'),
      /the server would refuse these settings: invalid configuration:\s+- STATEHOUSE_STORAGE must be one of/,
    ],
    [
      'a ConfigMap that is not in the manifests',
      'prod',
      (o) => (container(o).envFrom[0].configMapRef.name = 'statehouse-settings'),
      /ConfigMap statehouse-settings is not in the manifests/,
    ],
    [
      'an undocumented Secret key',
      'prod',
      (o) =>
        (container(o).env.find(
          (e: { name: string }) => e.name === 'DATABASE_URL',
        ).valueFrom.secretKeyRef.key = 'db-url'),
      /key db-url of Secret statehouse is not documented in deploy\/k8s\/README\.md/,
    ],
    [
      'a key file that is not mounted',
      'prod',
      (o) =>
        (deployment(o).template.spec.volumes.find(
          (v: { name: string }) => v.name === 'secrets',
        ).secret.items.length = 1),
      /STATEHOUSE_TOKENS_PRIVATE_KEY_FILE=\/run\/secrets\/statehouse\/tokens-signing-key is not a file of a mounted secret volume/,
    ],
    [
      'a migrations Job on another image',
      'prod',
      (o) =>
        (find(o, 'Job', 'statehouse-migrate').spec.template.spec.containers[0].image =
          'statehouse:0.0.9'),
      /Job\/statehouse-migrate: image differs from the server's/,
    ],
    [
      'a migrations Job with other settings',
      'prod',
      (o) => find(o, 'Job', 'statehouse-migrate').spec.template.spec.containers[0].env.pop(),
      /Job\/statehouse-migrate: env differs from the server's/,
    ],
    [
      'a ServiceMonitor on a port the Service does not name',
      'prod',
      (o) => (find(o, 'ServiceMonitor').spec.endpoints[0].port = 'metrics'),
      /ServiceMonitor\/statehouse: endpoint port metrics is no port name of the selected Service/,
    ],
    [
      'a NetworkPolicy letting in a port the server does not have',
      'prod',
      (o) => (find(o, 'NetworkPolicy').spec.ingress[0].ports[0].port = 'metrics'),
      /ingress port metrics is no container port/,
    ],
    [
      'an autoscaler on CPU without CPU requests',
      'prod',
      (o) => delete container(o).resources.requests.cpu,
      /scales on cpu utilisation, but a container requests no cpu/,
    ],
    [
      'replicas that migrate at start beside the migrations Job (STATEHOUSE_MIGRATE unset)',
      'prod',
      (o) => delete find(o, 'ConfigMap', 'statehouse-config').data.STATEHOUSE_MIGRATE,
      /Deployment\/statehouse: set STATEHOUSE_MIGRATE=false: the migrations Job migrates/,
    ],
    [
      'an embedded server that may not migrate (STATEHOUSE_MIGRATE=false, no Job)',
      'dev',
      (o) => (find(o, 'ConfigMap', 'statehouse-config').data.STATEHOUSE_MIGRATE = 'false'),
      /STATEHOUSE_MIGRATE must not be false on the embedded database/,
    ],
    [
      'two replicas on the embedded database',
      'dev',
      (o) => (deployment(o).replicas = 2),
      /the embedded database serves one replica \(replicas 2\)/,
    ],
    [
      'a rolling update on the embedded database',
      'dev',
      (o) =>
        (deployment(o).strategy = { type: 'RollingUpdate', rollingUpdate: { maxUnavailable: 0 } }),
      /the strategy must be Recreate/,
    ],
    [
      'a PodDisruptionBudget on the single embedded replica',
      'dev',
      (o) =>
        o.push(structuredClone(find(rendered.get('prod') as K8sObject[], 'PodDisruptionBudget'))),
      /a PodDisruptionBudget on a single replica blocks every node drain/,
    ],
    [
      'the embedded database on an emptyDir',
      'dev',
      (o) => (deployment(o).template.spec.volumes[0] = { name: 'data', emptyDir: {} }),
      /the embedded database must live on a PersistentVolumeClaim/,
    ],
    [
      'an Ingress that rewrites the path (rewrite-target)',
      'prod',
      (o) => (ingressAnnotations(o)['nginx.ingress.kubernetes.io/rewrite-target'] = '/'),
      /Ingress\/statehouse: no rewrite-target or regex paths/,
    ],
    [
      'an Ingress that buffers request bodies',
      'prod',
      (o) => delete ingressAnnotations(o)['nginx.ingress.kubernetes.io/proxy-request-buffering'],
      /Ingress\/statehouse: set nginx\.ingress\.kubernetes\.io\/proxy-request-buffering: "off"/,
    ],
    [
      'an Ingress with nginx’s default 1m body limit',
      'prod',
      (o) => delete ingressAnnotations(o)['nginx.ingress.kubernetes.io/proxy-body-size'],
      /Ingress\/statehouse: set nginx\.ingress\.kubernetes\.io\/proxy-body-size/,
    ],
    [
      'an Ingress backend naming no Service port',
      'prod',
      (o) => (find(o, 'Ingress').spec.rules[0].http.paths[0].backend.service.port.name = 'web'),
      /Ingress\/statehouse: backend statehouse:web is no port of a Service here/,
    ],
    [
      'an Ingress in front of replicas that trust no proxy',
      'prod',
      (o) => delete find(o, 'ConfigMap', 'statehouse-config').data.STATEHOUSE_TRUSTED_PROXIES,
      /Ingress\/statehouse: set STATEHOUSE_TRUSTED_PROXIES/,
    ],
  ];

  it.each(cases)('%s (%s)', (_what, name, breakIt, problem) => {
    const objects = copy(name);
    breakIt(objects);
    expect(check(name, objects)).toEqual(expect.arrayContaining([expect.stringMatching(problem)]));
  });

  it('a key documented for an overlay that the overlay does not use', () => {
    const secrets = documentedSecrets(README, 'dev');
    secrets.get('statehouse')?.add('database-url');
    expect(checkManifests(copy('dev'), secrets)).toContain(
      'key database-url of Secret statehouse is documented for these manifests but not used by them',
    );
  });
});

it('the README shows deploy/k8s/overlays/prod/ingress.yaml exactly', () => {
  const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
  const manifest = readFileSync(join(K8S, 'overlays', 'prod', 'ingress.yaml'), 'utf8');
  expect(readme).toContain('```yaml\n' + manifest + '```\n');
});
