/**
 * docker/Dockerfile, parsed (dockerfile-ast) and held to the image rules: multi-stage with the
 * production dependencies only in the final stage, Node LTS slim, a numeric non-root user,
 * the data dir and /tmp as volumes (read-only root filesystem), tini as PID 1, a HEALTHCHECK
 * that follows the server's settings (TLS included), OCI labels. Each rule is also shown to
 * fail on a Dockerfile that breaks it.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT } from '../support/paths';
import { dockerfileProblems, finalImage, parseStages } from './support/dockerfile-rules';

const DOCKERFILE = readFileSync(join(ROOT, 'docker', 'Dockerfile'), 'utf8');
const PKG = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
  version: string;
  license: string;
  scripts: Record<string, string>;
};

/** The real Dockerfile with one exact piece replaced (which must be there). */
function broken(find: string | RegExp, replace: string): string {
  const out = DOCKERFILE.replace(find, replace);
  if (out === DOCKERFILE) throw new Error(`the Dockerfile no longer contains ${String(find)}`);
  return out;
}

describe('docker/Dockerfile', () => {
  it('keeps every image rule', () => {
    expect(dockerfileProblems(DOCKERFILE, PKG)).toEqual([]);
  });

  it('has a build stage with all dependencies and a final stage fed from production-only ones', () => {
    const stages = parseStages(DOCKERFILE);
    expect(stages.map((s) => s.name)).toEqual(['toolchain', 'build', 'prod-deps', undefined]);
    const image = finalImage(DOCKERFILE);
    expect(image.copies).toEqual([
      { from: undefined, sources: ['package.json', 'package-lock.json'], dest: './' },
      { from: 'prod-deps', sources: ['/app/node_modules'], dest: './node_modules' },
      { from: 'build', sources: ['/app/dist'], dest: './dist' },
    ]);
    expect(image.workdir).toBe('/app');
  });

  it('copies into the build stage every local file `npm run build` runs or compiles from', () => {
    const build = parseStages(DOCKERFILE).find((s) => s.name === 'build');
    const copied = (build?.instructions ?? [])
      .filter((i) => i.getKeyword() === 'COPY')
      .flatMap((i) =>
        i
          .getArguments()
          .map((a) => a.getValue())
          .slice(0, -1),
      );
    const covers = (file: string) =>
      copied.some((src) => src === file || file.startsWith(`${src.replace(/\/$/, '')}/`));
    const needed = [
      'tsconfig.build.json',
      'src/cli/main.ts',
      ...[...PKG.scripts.build.matchAll(/node (\S+)/g)].map((m) => m[1]),
    ];
    expect(needed.length).toBeGreaterThan(2);
    expect(needed.filter((f) => !covers(f))).toEqual([]);
  });

  it('names the server entry point and the probe script that the build really produces', () => {
    // The paths in ENTRYPOINT and HEALTHCHECK are compiled from these sources.
    expect(readFileSync(join(ROOT, 'src/cli/main.ts'), 'utf8')).toMatch(/require\.main === module/);
    expect(readFileSync(join(ROOT, 'src/health/healthcheck.ts'), 'utf8')).toMatch(
      /require\.main === module/,
    );
  });
});

describe('the image rules refuse a Dockerfile that breaks them', () => {
  const cases: [string, () => string, RegExp][] = [
    [
      'a single stage',
      () =>
        'FROM node:24-trixie-slim\nWORKDIR /app\nCOPY . .\nRUN npm ci && npm run build\nUSER 1000\nCMD ["node", "dist/src/cli/main.js", "serve"]\n',
      /must be multi-stage/,
    ],
    [
      'an old Node line',
      () => broken(/^FROM node:24-trixie-slim$/m, 'FROM node:22-bookworm-slim'),
      /is based on node:22-bookworm-slim/,
    ],
    [
      'a full (not slim) base image',
      () => broken('FROM node:24-trixie-slim AS toolchain', 'FROM node:24-trixie AS toolchain'),
      /stage toolchain is based on node:24-trixie: use node:24-<debian>-slim/,
    ],
    [
      'a final stage built on the build stage',
      () => broken(/^FROM node:24-trixie-slim$/m, 'FROM build'),
      /final stage is built on stage build/,
    ],
    [
      'dev dependencies in the final stage',
      () => broken('RUN npm ci --omit=dev --no-audit --no-fund', 'RUN npm ci --no-audit --no-fund'),
      /which must install with `npm ci --omit=dev` only/,
    ],
    [
      'a user name',
      () => broken('USER 1000:1000', 'USER node'),
      /numeric non-root uid \(got node\)/,
    ],
    ['root', () => broken('USER 1000:1000', 'USER 0'), /numeric non-root uid \(got 0\)/],
    [
      'no /tmp volume',
      () => broken('VOLUME ["/data", "/tmp"]', 'VOLUME ["/data"]'),
      /declare \/tmp/,
    ],
    [
      'node as PID 1',
      () =>
        broken(
          'ENTRYPOINT ["/usr/bin/tini", "-e", "143", "--", "node", "dist/src/cli/main.js"]',
          'ENTRYPOINT ["node", "dist/src/cli/main.js"]',
        ),
      /ENTRYPOINT must start with tini/,
    ],
    [
      'tini reporting the clean stop on SIGTERM as 143',
      () => broken('"/usr/bin/tini", "-e", "143", "--"', '"/usr/bin/tini", "--"'),
      /ENTRYPOINT must run tini with exactly -e 143 .*, got \[\]/,
    ],
    [
      'tini hiding a failed stop',
      () =>
        broken(
          '"/usr/bin/tini", "-e", "143", "--"',
          '"/usr/bin/tini", "-e", "143", "-e", "1", "--"',
        ),
      /ENTRYPOINT must run tini with exactly -e 143/,
    ],
    [
      'tini that is never installed',
      () => broken(' && apt-get install -y --no-install-recommends tini \\\n', ' \\\n'),
      /must install tini/,
    ],
    [
      'the old plain-http health check',
      () =>
        broken(
          'CMD ["node", "dist/src/health/healthcheck.js"]',
          `CMD node -e "fetch('http://127.0.0.1:'+(process.env.PORT||8080)+'/healthz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"`,
        ),
      /HEALTHCHECK must run \["node", "dist\/src\/health\/healthcheck.js"\] in exec form/,
    ],
    [
      'no health check',
      () => broken(/^HEALTHCHECK[^\n]*\\\n[^\n]*\n/m, ''),
      /HEALTHCHECK is missing/,
    ],
    [
      'a missing OCI label',
      () => broken(/^ {6}org\.opencontainers\.image\.revision=[^\n]*\n/m, ''),
      /LABEL org\.opencontainers\.image\.revision is missing/,
    ],
    [
      'a version label that is not the package version',
      () => broken('ARG VERSION=0.1.0', 'ARG VERSION=9.9.9'),
      /ARG VERSION must default to package.json's version/,
    ],
  ];

  it.each(cases)('%s', (_name, text, problem) => {
    const problems = dockerfileProblems(text(), PKG);
    expect(problems).toEqual(expect.arrayContaining([expect.stringMatching(problem)]));
  });
});
