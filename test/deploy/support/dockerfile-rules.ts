import { DockerfileParser, Instruction } from 'dockerfile-ast';

/**
 * The image rules, checked on the Dockerfile's syntax tree (there is no container engine here
 * to build it): what the final stage runs, as whom, with which files, volumes and labels.
 */

export interface Stage {
  name: string | undefined;
  /** `node:24-trixie-slim`, or another stage's name. */
  base: string;
  instructions: Instruction[];
}

export interface CopyStep {
  from: string | undefined;
  sources: string[];
  dest: string;
}

/** What a container of the final stage is: the facts the rules and the command test read. */
export interface FinalImage {
  stage: Stage;
  workdir: string | undefined;
  env: Record<string, string>;
  user: string | undefined;
  entrypoint: string[] | undefined;
  cmd: string[] | undefined;
  healthcheck: { flags: Record<string, string>; command: string[] | undefined } | undefined;
  volumes: string[];
  labels: Record<string, string>;
  exposed: string[];
  copies: CopyStep[];
  runs: string[];
}

export function parseStages(text: string): Stage[] {
  const stages: Stage[] = [];
  for (const instruction of DockerfileParser.parse(text).getInstructions()) {
    if (instruction.getKeyword() === 'FROM') {
      const args = instruction.getArguments().map((a) => a.getValue());
      stages.push({
        name: args[1]?.toUpperCase() === 'AS' ? args[2] : undefined,
        base: args[0],
        instructions: [],
      });
    } else if (stages.length > 0) {
      stages[stages.length - 1].instructions.push(instruction);
    }
  }
  return stages;
}

/** The exec-form (JSON) argument list of ENTRYPOINT, CMD or HEALTHCHECK CMD, else undefined. */
function execForm(instruction: Instruction, skip = 0): string[] | undefined {
  const text = instruction
    .getArguments()
    .slice(skip)
    .map((a) => a.getValue())
    .join(' ');
  try {
    const parsed: unknown = JSON.parse(text);
    return Array.isArray(parsed) && parsed.every((x) => typeof x === 'string') ? parsed : undefined;
  } catch {
    return undefined;
  }
}

/** `KEY=value` pairs of ENV or LABEL (quotes removed by the parser). */
function properties(instruction: Instruction): Record<string, string> {
  const out: Record<string, string> = {};
  const withProps = instruction as unknown as {
    getProperties?: () => { getName(): string; getValue(): string | null }[];
  };
  for (const p of withProps.getProperties?.() ?? []) out[p.getName()] = p.getValue() ?? '';
  return out;
}

export function finalImage(text: string): FinalImage {
  const stages = parseStages(text);
  const stage = stages[stages.length - 1];
  const image: FinalImage = {
    stage,
    workdir: undefined,
    env: {},
    user: undefined,
    entrypoint: undefined,
    cmd: undefined,
    healthcheck: undefined,
    volumes: [],
    labels: {},
    exposed: [],
    copies: [],
    runs: [],
  };
  for (const i of stage?.instructions ?? []) {
    const args = i.getArguments().map((a) => a.getValue());
    switch (i.getKeyword()) {
      case 'WORKDIR':
        image.workdir = args[0];
        break;
      case 'ENV':
        Object.assign(image.env, properties(i));
        break;
      case 'LABEL':
        Object.assign(image.labels, properties(i));
        break;
      case 'USER':
        image.user = args[0];
        break;
      case 'ENTRYPOINT':
        image.entrypoint = execForm(i) ?? ['/bin/sh', '-c', args.join(' ')];
        break;
      case 'CMD':
        image.cmd = execForm(i) ?? ['/bin/sh', '-c', args.join(' ')];
        break;
      case 'HEALTHCHECK': {
        const flags: Record<string, string> = {};
        for (const f of (
          i as unknown as { getFlags(): { getName(): string; getValue(): string | null }[] }
        ).getFlags()) {
          flags[f.getName()] = f.getValue() ?? '';
        }
        const kind = args[0]?.toUpperCase();
        image.healthcheck = {
          flags,
          command:
            kind === 'CMD' ? (execForm(i, 1) ?? ['/bin/sh', '-c', args.slice(1).join(' ')]) : [],
        };
        break;
      }
      case 'VOLUME':
        image.volumes.push(...(execForm(i) ?? args));
        break;
      case 'EXPOSE':
        image.exposed.push(...args);
        break;
      case 'COPY': {
        const from = (
          i as unknown as { getFromFlag(): { getValue(): string | null } | null }
        ).getFromFlag();
        const paths = args.filter((a) => !a.startsWith('--'));
        image.copies.push({
          from: from?.getValue() ?? undefined,
          sources: paths.slice(0, -1),
          dest: paths[paths.length - 1],
        });
        break;
      }
      case 'RUN':
        image.runs.push(args.join(' '));
        break;
      default:
        break;
    }
  }
  return image;
}

/** The Node LTS line the image must run (Node 24 "Krypton" is the active LTS). */
export const NODE_LTS_MAJOR = 24;

/** OCI annotation keys the image must carry (https://github.com/opencontainers/image-spec). */
export const REQUIRED_OCI_LABELS = [
  'org.opencontainers.image.title',
  'org.opencontainers.image.description',
  'org.opencontainers.image.version',
  'org.opencontainers.image.revision',
  'org.opencontainers.image.created',
  'org.opencontainers.image.licenses',
];

const runsOf = (stage: Stage): string[] =>
  stage.instructions
    .filter((i) => i.getKeyword() === 'RUN')
    .map((i) =>
      i
        .getArguments()
        .map((a) => a.getValue())
        .join(' '),
    );

/**
 * Every broken rule, one line each (empty: the Dockerfile is fine). `pkg` is package.json, so
 * the labels can be held to the package's version and licence.
 */
export function dockerfileProblems(
  text: string,
  pkg: { version: string; license: string },
): string[] {
  const problems: string[] = [];
  const stages = parseStages(text);
  const image = finalImage(text);
  const byName = new Map(stages.filter((s) => s.name).map((s) => [s.name as string, s]));
  /** The stage and all stages it is built on. */
  const lineage = (stage: Stage): Stage[] => {
    const chain = [stage];
    for (let s = byName.get(stage.base); s && !chain.includes(s); s = byName.get(s.base)) {
      chain.push(s);
    }
    return chain;
  };
  const baseImage = (stage: Stage): string => lineage(stage)[lineage(stage).length - 1].base;

  // Stages: a build with every dependency, a final stage with production ones only.
  if (stages.length < 2) problems.push('the Dockerfile must be multi-stage (build, then run)');
  const lts = new RegExp(`^(docker\\.io/library/)?node:${NODE_LTS_MAJOR}-[a-z]+-slim$`);
  for (const s of stages) {
    const base = baseImage(s);
    if (!lts.test(base)) {
      problems.push(
        `stage ${s.name ?? '(final)'} is based on ${base}: use node:${NODE_LTS_MAJOR}-<debian>-slim (the current LTS)`,
      );
    }
  }
  const final = image.stage;
  if (!final) return ['the Dockerfile has no FROM'];
  if (byName.has(final.base)) {
    problems.push(
      `the final stage is built on stage ${final.base}: start it from the base image, so no toolchain or dev dependency carries over`,
    );
  }
  const npmIn = (runs: string[]) => runs.filter((r) => /\bnpm (ci|install|i)\b/.test(r));
  if (npmIn(image.runs).length > 0) {
    problems.push('the final stage runs npm: install dependencies in a build stage and copy them');
  }
  const buildStages = stages.filter((s) => s !== final);
  if (!buildStages.some((s) => runsOf(s).some((r) => /\bnpm run build\b/.test(r)))) {
    problems.push('no build stage runs `npm run build`');
  }
  const copied = (dest: RegExp) => image.copies.filter((c) => dest.test(c.dest));
  const modules = copied(/(^|\/)node_modules\/?$/);
  if (modules.length !== 1 || !modules[0].from) {
    problems.push('the final stage must copy node_modules from exactly one earlier stage');
  } else {
    const from = byName.get(modules[0].from);
    const installs = from ? npmIn(runsOf(from)) : [];
    if (installs.length === 0 || !installs.every((r) => /\bnpm ci\b.*--omit=dev\b/.test(r))) {
      problems.push(
        `node_modules comes from stage ${modules[0].from}, which must install with \`npm ci --omit=dev\` only (production dependencies, from the lock file)`,
      );
    }
  }
  if (copied(/(^|\/)dist\/?$/).filter((c) => c.from).length !== 1) {
    problems.push('the final stage must copy the compiled dist from the build stage');
  }
  for (const c of image.copies) {
    if (!c.from && c.sources.some((s) => s === '.' || s === 'src' || s.startsWith('src/'))) {
      problems.push(`the final stage copies sources (${c.sources.join(' ')}): copy only dist`);
    }
  }

  // Who runs it, and what it may write.
  const uid = image.user?.split(':')[0];
  if (uid === undefined || !/^\d+$/.test(uid) || uid === '0') {
    problems.push(
      `USER must be a numeric non-root uid (got ${image.user ?? 'none'}): Kubernetes' runAsNonRoot can only check a number`,
    );
  }
  const dataDir = image.env.STATEHOUSE_DATA_DIR;
  if (!dataDir) problems.push('ENV must set STATEHOUSE_DATA_DIR (the data volume)');
  for (const v of [dataDir, '/tmp'].filter((x): x is string => !!x)) {
    if (!image.volumes.includes(v)) {
      problems.push(
        `VOLUME must declare ${v}: with a read-only root filesystem it is the only place to write`,
      );
    }
  }
  if (image.env.NODE_ENV !== 'production') problems.push('ENV must set NODE_ENV=production');
  const port = image.env.PORT;
  if (!port || !image.exposed.some((e) => e.split('/')[0] === port)) {
    problems.push(`EXPOSE must name the port the server listens on (PORT=${port ?? 'unset'})`);
  }

  // PID 1: an init that forwards signals, and reports the server's clean stop on SIGTERM (its
  // exit status 143) as 0 — `tini -e 143` — so the container's exit says clean or not.
  const ep = image.entrypoint ?? [];
  const split = ep.indexOf('--');
  const initArgs = split < 0 ? [] : ep.slice(1, split);
  if (!/(^|\/)tini(-static)?$/.test(ep[0] ?? '') || split < 0) {
    problems.push(
      `ENTRYPOINT must start with tini in exec form (["/usr/bin/tini", "-e", "143", "--", …]), got ${JSON.stringify(image.entrypoint ?? null)}`,
    );
  } else if (!image.runs.some((r) => /apt-get install\b.*\btini\b/.test(r))) {
    problems.push('the final stage must install tini (apt-get install tini)');
  }
  if (split >= 0 && JSON.stringify(initArgs) !== JSON.stringify(['-e', '143'])) {
    problems.push(
      `ENTRYPOINT must run tini with exactly -e 143 (the server's clean stop on SIGTERM is 143, which the container reports as 0; 1 stays 1), got ${JSON.stringify(initArgs)}`,
    );
  }
  const command = [...(split < 0 ? [] : ep.slice(split + 1)), ...(image.cmd ?? [])];
  if (command[0] !== 'node' || command[1] !== 'dist/src/cli/main.js' || command[2] !== 'serve') {
    problems.push(
      `ENTRYPOINT + CMD must run \`node dist/src/cli/main.js serve\` under tini, got ${JSON.stringify(command)}`,
    );
  }
  if (image.runs.some((r) => /apt-get install/.test(r) && !/--no-install-recommends/.test(r))) {
    problems.push('apt-get install needs --no-install-recommends in the final stage');
  }
  if (
    image.runs.some(
      (r) => /apt-get (update|install)/.test(r) && !/rm -rf \/var\/lib\/apt\/lists/.test(r),
    )
  ) {
    problems.push('the final stage must remove /var/lib/apt/lists after apt-get');
  }

  // The health check: the probe script, exec form, bounded.
  const hc = image.healthcheck;
  if (!hc) {
    problems.push('HEALTHCHECK is missing');
  } else {
    if (JSON.stringify(hc.command) !== JSON.stringify(['node', 'dist/src/health/healthcheck.js'])) {
      problems.push(
        `HEALTHCHECK must run ["node", "dist/src/health/healthcheck.js"] in exec form (it follows PORT, STATEHOUSE_HOST and TLS), got ${JSON.stringify(hc.command)}`,
      );
    }
    for (const flag of ['interval', 'timeout', 'start-period']) {
      if (!hc.flags[flag]) problems.push(`HEALTHCHECK must set --${flag}`);
    }
    const timeout = /^(\d+)s$/.exec(hc.flags.timeout ?? '');
    if (timeout && Number(timeout[1]) < 5) {
      problems.push('HEALTHCHECK --timeout must exceed the probe’s own 4 s limit (at least 5s)');
    }
  }

  // Labels.
  for (const key of REQUIRED_OCI_LABELS) {
    if (!image.labels[key]) problems.push(`LABEL ${key} is missing`);
  }
  const versionArg = final.instructions
    .filter((i) => i.getKeyword() === 'ARG')
    .map((i) => i.getArguments()[0]?.getValue() ?? '')
    .find((a) => a.startsWith('VERSION='));
  if (image.labels['org.opencontainers.image.version'] === '${VERSION}') {
    if (versionArg !== `VERSION=${pkg.version}`) {
      problems.push(`ARG VERSION must default to package.json's version ${pkg.version}`);
    }
  } else if (image.labels['org.opencontainers.image.version'] !== pkg.version) {
    problems.push(`LABEL org.opencontainers.image.version must be ${pkg.version}`);
  }
  const licence = image.labels['org.opencontainers.image.licenses'];
  if (licence && licence !== pkg.license) {
    problems.push(`LABEL org.opencontainers.image.licenses must be ${pkg.license}`);
  }
  return problems;
}
