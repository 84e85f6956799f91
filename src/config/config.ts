import { createPrivateKey } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { isIP } from 'node:net';
import { resolve } from 'node:path';
import { parseCorsOrigin } from '../common/cors';
import { trimBoth, trimEnd } from '../common/trim';
import { Secret } from './secret';

/** Names of the blob drivers (STATEHOUSE_STORAGE), in the order they are documented. */
export const BLOB_DRIVERS = ['fs', 's3', 'postgres', 'memory'] as const;
export type BlobDriverName = (typeof BLOB_DRIVERS)[number];

export type LogLevel = 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';
const LOG_LEVELS: readonly LogLevel[] = [
  'fatal',
  'error',
  'warn',
  'info',
  'debug',
  'trace',
  'silent',
];

/** `auto`: one human-readable line per event on a terminal, JSON lines otherwise. */
export type LogFormat = 'auto' | 'json' | 'text';
const LOG_FORMATS: readonly LogFormat[] = ['auto', 'json', 'text'];

export interface S3StorageConfig {
  bucket: string;
  prefix: string;
  region: string;
  endpoint: string | undefined;
  forcePathStyle: boolean;
}

/** Every setting, read once at start. Nothing else in the program reads `process.env`. */
export interface AppConfig {
  port: number;
  host: string;
  dataDir: string;
  /** Undefined means the embedded database in `dataDir`. */
  databaseUrl: Secret | undefined;
  databasePoolSize: number;
  /**
   * STATEHOUSE_MIGRATE: `serve` applies pending migrations at start. When false (replicas whose
   * migrations a Job runs), a server whose schema is behind waits, not ready, for `statehouse
   * migrate`; `statehouse migrate` itself always migrates.
   */
  migrate: boolean;
  storage: {
    driver: BlobDriverName;
    fsDir: string;
    s3: S3StorageConfig | undefined;
    /** Memory for the bytes of recently read blobs (0: none kept). */
    cacheMiB: number;
  };
  maxVersions: number;
  maxStateBytes: number;
  /**
   * State bytes being inspected at once (per replica), and how many writes may wait for room
   * (see state/inspection-budget.ts).
   */
  inspection: { maxBytes: number; queue: number };
  trustedProxies: string[];
  /**
   * Web origins whose pages may call the management API from a browser (CORS); empty: CORS
   * is off. Each as browsers send `Origin` (see common/cors.ts).
   */
  corsOrigins: string[];
  publicUrl: string;
  /**
   * Other base URLs clients reach this server by (besides `publicUrl`), to recognise its own
   * addresses inside consumers' `terraform_remote_state` configs.
   */
  aliases: string[];
  /** STATEHOUSE_ALIASES was not set: loopback at the port actually listened on (PORT=0). */
  defaultAliases: boolean;
  bootstrapToken: Secret | undefined;
  /** When set, `/metrics` answers only `Authorization: Bearer <it>`; unset, it is public. */
  metricsToken: Secret | undefined;
  authDisabled: boolean;
  tls: { certFile: string; keyFile: string } | undefined;
  logLevel: LogLevel;
  logFormat: LogFormat;
  /** Colours in the text format (on a terminal only); off when NO_COLOR is set. */
  logColor: boolean;
  /** How long in-flight requests may take to finish after SIGTERM or SIGINT. */
  shutdownTimeoutSeconds: number;
  /**
   * How long, within that, new connections are still accepted after the signal (each of their
   * requests answered 503 with `Connection: close`), for a load balancer that has not yet seen
   * /readyz turn 503; then they are refused.
   */
  shutdownGraceSeconds: number;
  oidc: { issuer: string; clientId: string; scopes: string[]; groupsClaim: string } | undefined;
  tokens: {
    /** PKCS#8 PEM of the Ed25519 signing key, when configured (else generated and stored). */
    privateKeyPem: Secret | undefined;
    kid: string | undefined;
    accessTtlSeconds: number;
    refreshTtlSeconds: number;
  };
  sts: {
    /** The key id new credentials are issued under. */
    kid: string;
    /** Configured HMAC secrets by key id (others are generated and stored). */
    hmacKeys: Map<string, Secret>;
    ttlSeconds: number;
  };
  /** Requests per minute per client address on the login and token endpoints. */
  authRateLimitPerMinute: number;
  s3Door: {
    /**
     * STATEHOUSE_S3_PORT: the S3 door is also served at the root of a listener of its own on
     * this port (0: any free port), for clients that cannot put a path in their endpoint.
     */
    port: number | undefined;
    /** Bucket names the `/s3` door answers for. */
    buckets: string[];
    /** Terraform `workspace_key_prefix` values understood in object keys. */
    workspacePrefixes: string[];
  };
  /**
   * Testing only: named points where the process kills itself (SIGKILL), to prove what a crash
   * there leaves behind. Empty in any real deployment.
   */
  failpoints: ReadonlySet<Failpoint>;
  /** Settings that were accepted but deserve a word at start (never secrets). */
  warnings: string[];
}

/** Where `STATEHOUSE_TEST_FAILPOINTS` may kill the process. */
export const FAILPOINTS = ['write.before-graph', 'write.after-commit'] as const;
export type Failpoint = (typeof FAILPOINTS)[number];

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`invalid configuration:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
    this.name = 'ConfigError';
  }
}

type Env = Record<string, string | undefined>;

/** STATEHOUSE_SHUTDOWN_TIMEOUT's default: how long a stop may wait for requests in flight. */
export const DEFAULT_SHUTDOWN_TIMEOUT_SECONDS = 25;
/** STATEHOUSE_SHUTDOWN_GRACE's default: new connections are still answered (503) this long. */
export const DEFAULT_SHUTDOWN_GRACE_SECONDS = 2;

const DURATION_UNITS: Record<string, number> = { s: 1, m: 60, h: 3600, d: 86400 };

const SIZE_UNITS: Record<string, number> = {
  '': 1,
  b: 1,
  k: 1024,
  kb: 1000,
  kib: 1024,
  m: 1024 ** 2,
  mb: 1000 ** 2,
  mib: 1024 ** 2,
  g: 1024 ** 3,
  gb: 1000 ** 3,
  gib: 1024 ** 3,
};

// ------------------------------------------------------------------------------------ readers
//
// Each group of settings has a reader that declares the variables it reads; it reads them only
// through the accessors below, which refuse (as a programming error) a variable its reader did
// not declare. The set of known variables is the union of those declarations, so a new setting
// cannot be read without also becoming known.

/** How a reader sees the environment: typed accessors, and where it reports what it found. */
interface Read {
  /** The value trimmed, or undefined when unset or blank. */
  str(name: string): string | undefined;
  /** The value exactly as set. */
  raw(name: string): string | undefined;
  int(name: string, def: number, min: number, max: number): number;
  bool(name: string, def?: boolean): boolean;
  size(name: string, def: number): number;
  url(name: string): string | undefined;
  duration(name: string, def: number, min: number, max: number): number;
  /** A comma-separated list, entries trimmed, empty ones dropped. */
  list(name: string, def: string): string[];
  /** A secret given as `NAME` or in the file `NAME_FILE` (at most one of them). */
  secret(name: string): Secret | undefined;
  /** Every variable whose name starts with a declared prefix. */
  prefixed(prefix: string): [string, string | undefined][];
  problem(message: string): void;
  warn(message: string): void;
}

/** What a reader declares it reads. */
interface Declared {
  /** Variables by exact name. */
  readonly names: readonly string[];
  /** Name prefixes: every variable whose name starts with one. */
  readonly prefixes: readonly string[];
}

interface Reader<A extends unknown[], T> extends Declared {
  read(r: Read, ...args: A): T;
}

function reader<A extends unknown[], T>(
  names: readonly string[],
  read: (r: Read, ...args: A) => T,
  prefixes: readonly string[] = [],
): Reader<A, T> {
  return { names, prefixes, read };
}

function accessors(env: Env, declared: Declared, problems: string[], warnings: string[]): Read {
  const names = new Set(declared.names);
  const get = (name: string): string | undefined => {
    if (!names.has(name)) throw new Error(`config reader reads ${name} without declaring it`);
    return env[name];
  };
  const str = (name: string): string | undefined => {
    const v = get(name);
    return v === undefined || v.trim() === '' ? undefined : v.trim();
  };
  const read: Read = {
    str,
    raw: get,
    int(name, def, min, max) {
      const raw = str(name);
      if (raw === undefined) return def;
      if (!/^\d+$/.test(raw) || Number(raw) < min || Number(raw) > max) {
        problems.push(`${name} must be an integer from ${min} to ${max} (got "${raw}")`);
        return def;
      }
      return Number(raw);
    },
    bool(name, def = false) {
      const raw = str(name)?.toLowerCase();
      if (raw === undefined) return def;
      if (['1', 'true', 'yes', 'on'].includes(raw)) return true;
      if (['0', 'false', 'no', 'off'].includes(raw)) return false;
      problems.push(`${name} must be true or false (got "${raw}")`);
      return def;
    },
    size(name, def) {
      const raw = str(name);
      if (raw === undefined) return def;
      const m = /^(\d+)\s*([a-z]*)$/i.exec(raw);
      const unit = m ? SIZE_UNITS[m[2].toLowerCase()] : undefined;
      if (!m || unit === undefined || Number(m[1]) * unit < 1 || Number(m[1]) * unit > 2 ** 40) {
        problems.push(
          `${name} must be a size in bytes, optionally with KiB/MiB/GiB (got "${raw}")`,
        );
        return def;
      }
      return Number(m[1]) * unit;
    },
    url(name) {
      const raw = str(name);
      if (raw === undefined) return undefined;
      try {
        const u = new URL(raw);
        if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new Error('scheme');
        return trimEnd(raw, '/');
      } catch {
        problems.push(`${name} must be an http(s) URL (got "${raw}")`);
        return undefined;
      }
    },
    duration(name, def, min, max) {
      const raw = str(name);
      if (raw === undefined) return def;
      const m = /^(\d+)\s*(s|m|h|d)?$/i.exec(raw);
      const secs = m ? Number(m[1]) * DURATION_UNITS[(m[2] ?? 's').toLowerCase()] : NaN;
      if (!m || secs < min || secs > max) {
        problems.push(
          `${name} must be a duration like 900, 15m, 1h or 30d, from ${min}s to ${max}s (got "${raw}")`,
        );
        return def;
      }
      return secs;
    },
    list(name, def) {
      return (str(name) ?? def)
        .split(',')
        .map((x) => x.trim())
        .filter((x) => x !== '');
    },
    secret(name) {
      const raw = str(name);
      const file = str(`${name}_FILE`);
      if (raw !== undefined && file !== undefined) {
        problems.push(`set only one of ${name} and ${name}_FILE`);
        return undefined;
      }
      if (raw !== undefined) return checkToken(name, raw, problems);
      if (file === undefined) return undefined;
      try {
        return checkToken(`${name}_FILE`, readFileSync(file, 'utf8').trim(), problems);
      } catch (e) {
        problems.push(`${name}_FILE cannot be read: ${(e as Error).message}`);
        return undefined;
      }
    },
    prefixed(prefix) {
      if (!declared.prefixes.includes(prefix)) {
        throw new Error(`config reader reads ${prefix}* without declaring it`);
      }
      return Object.entries(env).filter(([name]) => name.startsWith(prefix));
    },
    problem: (message) => void problems.push(message),
    warn: (message) => void warnings.push(message),
  };
  return read;
}

/** Where the server listens, and its data directory. */
const serverReader = reader(
  ['PORT', 'STATEHOUSE_S3_PORT', 'STATEHOUSE_HOST', 'STATEHOUSE_DATA_DIR'],
  (r) => {
    const port = r.int('PORT', 8080, 0, 65535);
    const s3Port =
      r.str('STATEHOUSE_S3_PORT') === undefined
        ? undefined
        : r.int('STATEHOUSE_S3_PORT', 0, 0, 65535);
    if (s3Port !== undefined && s3Port !== 0 && s3Port === port) {
      r.problem(
        `STATEHOUSE_S3_PORT must differ from PORT (both ${port}): it is a listener of its own`,
      );
    }
    const host = r.str('STATEHOUSE_HOST') ?? '0.0.0.0';
    const dataDir = resolve(r.str('STATEHOUSE_DATA_DIR') ?? './data');
    return { port, s3Port, host, dataDir };
  },
);

const databaseReader = reader(
  ['DATABASE_URL', 'STATEHOUSE_DATABASE_POOL_SIZE', 'STATEHOUSE_MIGRATE'],
  (r) => {
    let databaseUrl: Secret | undefined;
    const dbRaw = r.str('DATABASE_URL');
    if (dbRaw !== undefined) {
      try {
        const u = new URL(dbRaw);
        if (u.protocol !== 'postgres:' && u.protocol !== 'postgresql:') throw new Error('scheme');
        databaseUrl = new Secret(dbRaw);
      } catch {
        // The URL may hold a password: name the variable, never the value.
        r.problem('DATABASE_URL must be a postgres:// or postgresql:// URL');
      }
    }
    return {
      /** DATABASE_URL is set (valid or not). */
      external: dbRaw !== undefined,
      databaseUrl,
      databasePoolSize: r.int('STATEHOUSE_DATABASE_POOL_SIZE', 10, 1, 1000),
      migrate: r.bool('STATEHOUSE_MIGRATE', true),
    };
  },
);

const storageReader = reader(
  [
    'STATEHOUSE_STORAGE',
    'NODE_ENV',
    'STATEHOUSE_STORAGE_FS_DIR',
    'STATEHOUSE_STORAGE_S3_BUCKET',
    'STATEHOUSE_STORAGE_S3_PREFIX',
    'STATEHOUSE_STORAGE_S3_REGION',
    'STATEHOUSE_STORAGE_S3_ENDPOINT',
    'STATEHOUSE_STORAGE_S3_FORCE_PATH_STYLE',
    'STATEHOUSE_BLOB_CACHE_MIB',
  ],
  (r, dataDir: string, externalDatabase: boolean): AppConfig['storage'] => {
    const driverRaw = r.str('STATEHOUSE_STORAGE');
    let driver: BlobDriverName = externalDatabase ? 'postgres' : 'fs';
    if (driverRaw !== undefined) {
      if ((BLOB_DRIVERS as readonly string[]).includes(driverRaw)) {
        driver = driverRaw as BlobDriverName;
      } else {
        r.problem(
          `STATEHOUSE_STORAGE must be one of ${BLOB_DRIVERS.join(', ')} (got "${driverRaw}")`,
        );
      }
    }
    if (driver === 'memory' && r.raw('NODE_ENV') !== 'test') {
      r.problem(
        'STATEHOUSE_STORAGE=memory is for tests only: blobs would vanish on restart (use fs, s3 or postgres)',
      );
    }
    const fsDir = resolve(r.str('STATEHOUSE_STORAGE_FS_DIR') ?? `${dataDir}/blobs`);
    let s3: S3StorageConfig | undefined;
    if (driver === 's3') {
      const bucket = r.str('STATEHOUSE_STORAGE_S3_BUCKET');
      if (bucket === undefined)
        r.problem('STATEHOUSE_STORAGE_S3_BUCKET is required with STATEHOUSE_STORAGE=s3');
      const prefix = r.str('STATEHOUSE_STORAGE_S3_PREFIX') ?? '';
      if (prefix !== '' && !/^[A-Za-z0-9/_.-]+$/.test(prefix)) {
        r.problem('STATEHOUSE_STORAGE_S3_PREFIX may only hold letters, digits and / _ . -');
      }
      s3 = {
        bucket: bucket ?? '',
        prefix: trimBoth(prefix, '/'),
        region: r.str('STATEHOUSE_STORAGE_S3_REGION') ?? 'us-east-1',
        endpoint: r.url('STATEHOUSE_STORAGE_S3_ENDPOINT'),
        forcePathStyle: r.bool('STATEHOUSE_STORAGE_S3_FORCE_PATH_STYLE'),
      };
    }
    const cacheMiB = r.int('STATEHOUSE_BLOB_CACHE_MIB', 64, 0, 65_536);
    return { driver, fsDir, s3, cacheMiB };
  },
);

/** How many versions are kept, how large a state may be, how much is inspected at once. */
const limitsReader = reader(
  [
    'STATEHOUSE_MAX_VERSIONS',
    'STATEHOUSE_MAX_STATE_BYTES',
    'STATEHOUSE_INSPECTION_MAX_BYTES',
    'STATEHOUSE_INSPECTION_QUEUE',
  ],
  (r) => {
    const maxVersions = r.int('STATEHOUSE_MAX_VERSIONS', 0, 0, 1_000_000);
    const maxStateBytes = r.size('STATEHOUSE_MAX_STATE_BYTES', 512 * 1024 ** 2);
    const inspectionMaxBytes = r.size('STATEHOUSE_INSPECTION_MAX_BYTES', 2 * maxStateBytes);
    if (inspectionMaxBytes < maxStateBytes) {
      r.problem(
        `STATEHOUSE_INSPECTION_MAX_BYTES must be at least STATEHOUSE_MAX_STATE_BYTES (${maxStateBytes} bytes): a state of the largest accepted size could never be written (got ${inspectionMaxBytes})`,
      );
    }
    const inspectionQueue = r.int('STATEHOUSE_INSPECTION_QUEUE', 32, 0, 10_000);
    return {
      maxVersions,
      maxStateBytes,
      inspection: { maxBytes: inspectionMaxBytes, queue: inspectionQueue },
    };
  },
);

/** Which peers may speak for clients (X-Forwarded-For), and which web origins may call. */
const clientsReader = reader(['STATEHOUSE_TRUSTED_PROXIES', 'STATEHOUSE_CORS_ORIGINS'], (r) => {
  const trustedProxies = (r.str('STATEHOUSE_TRUSTED_PROXIES') ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
  for (const p of trustedProxies) {
    const [addr, bits, ...rest] = p.split('/');
    const family = isIP(addr);
    const maxBits = family === 6 ? 128 : 32;
    if (
      family === 0 ||
      rest.length > 0 ||
      (bits !== undefined && (!/^\d+$/.test(bits) || Number(bits) > maxBits))
    ) {
      r.problem(`STATEHOUSE_TRUSTED_PROXIES entry "${p}" is not an IP address or CIDR range`);
    }
  }

  const corsOrigins: string[] = [];
  for (const entry of (r.str('STATEHOUSE_CORS_ORIGINS') ?? '').split(',')) {
    if (entry.trim() === '') continue;
    const parsed = parseCorsOrigin(entry.trim());
    if ('problem' in parsed) r.problem(`STATEHOUSE_CORS_ORIGINS: ${parsed.problem}`);
    else if (!corsOrigins.includes(parsed.origin)) corsOrigins.push(parsed.origin);
  }
  return { trustedProxies, corsOrigins };
});

/** TLS, and the URL the server is reached by (its scheme follows TLS). */
const tlsReader = reader(
  ['STATEHOUSE_TLS_CERT_FILE', 'STATEHOUSE_TLS_KEY_FILE', 'STATEHOUSE_PUBLIC_URL'],
  (r, port: number) => {
    const tlsCert = r.str('STATEHOUSE_TLS_CERT_FILE');
    const tlsKey = r.str('STATEHOUSE_TLS_KEY_FILE');
    if ((tlsCert === undefined) !== (tlsKey === undefined)) {
      r.problem('STATEHOUSE_TLS_CERT_FILE and STATEHOUSE_TLS_KEY_FILE must be set together');
    }
    const tls =
      tlsCert && tlsKey ? { certFile: resolve(tlsCert), keyFile: resolve(tlsKey) } : undefined;
    const scheme = tls ? 'https' : 'http';
    const publicUrl = r.url('STATEHOUSE_PUBLIC_URL') ?? `${scheme}://localhost:${port}`;
    return { tls, scheme, publicUrl };
  },
);

const secretsReader = reader(
  [
    'STATEHOUSE_BOOTSTRAP_TOKEN',
    'STATEHOUSE_BOOTSTRAP_TOKEN_FILE',
    'STATEHOUSE_METRICS_TOKEN',
    'STATEHOUSE_METRICS_TOKEN_FILE',
  ],
  (r) => ({
    bootstrapToken: r.secret('STATEHOUSE_BOOTSTRAP_TOKEN'),
    metricsToken: r.secret('STATEHOUSE_METRICS_TOKEN'),
  }),
);

const authSwitchReader = reader(
  ['STATEHOUSE_AUTH_DISABLE'],
  (r, externalDatabase: boolean, host: string) => {
    const authDisabled = r.bool('STATEHOUSE_AUTH_DISABLE');
    if (authDisabled) {
      if (externalDatabase) {
        r.problem('STATEHOUSE_AUTH_DISABLE is refused when DATABASE_URL is set (development only)');
      }
      if (!isLoopback(host)) {
        r.problem(
          `STATEHOUSE_AUTH_DISABLE is refused unless STATEHOUSE_HOST is a loopback address (got "${host}")`,
        );
      }
      r.warn(
        'authentication is DISABLED (STATEHOUSE_AUTH_DISABLE): every request is an anonymous admin',
      );
    }
    return authDisabled;
  },
);

const logReader = reader(['STATEHOUSE_LOG_LEVEL', 'STATEHOUSE_LOG_FORMAT', 'NO_COLOR'], (r) => {
  const logRaw = r.str('STATEHOUSE_LOG_LEVEL')?.toLowerCase() ?? 'info';
  let logLevel: LogLevel = 'info';
  if ((LOG_LEVELS as readonly string[]).includes(logRaw)) logLevel = logRaw as LogLevel;
  else r.problem(`STATEHOUSE_LOG_LEVEL must be one of ${LOG_LEVELS.join(', ')} (got "${logRaw}")`);

  const formatRaw = r.str('STATEHOUSE_LOG_FORMAT')?.toLowerCase() ?? 'auto';
  let logFormat: LogFormat = 'auto';
  if ((LOG_FORMATS as readonly string[]).includes(formatRaw)) logFormat = formatRaw as LogFormat;
  else
    r.problem(
      `STATEHOUSE_LOG_FORMAT must be one of ${LOG_FORMATS.join(', ')} (got "${formatRaw}")`,
    );
  // https://no-color.org: any non-empty value turns colours off.
  const logColor = (r.raw('NO_COLOR') ?? '') === '';
  return { logLevel, logFormat, logColor };
});

const shutdownReader = reader(['STATEHOUSE_SHUTDOWN_TIMEOUT', 'STATEHOUSE_SHUTDOWN_GRACE'], (r) => {
  const shutdownTimeoutSeconds = r.duration(
    'STATEHOUSE_SHUTDOWN_TIMEOUT',
    DEFAULT_SHUTDOWN_TIMEOUT_SECONDS,
    1,
    3600,
  );
  // The grace is part of the drain: the default shortens to fit a shorter timeout; a grace set
  // longer than the timeout is a contradiction.
  const grace = r.duration('STATEHOUSE_SHUTDOWN_GRACE', DEFAULT_SHUTDOWN_GRACE_SECONDS, 0, 3600);
  if (r.str('STATEHOUSE_SHUTDOWN_GRACE') !== undefined && grace > shutdownTimeoutSeconds) {
    r.problem(
      `STATEHOUSE_SHUTDOWN_GRACE (${grace}s) must not be longer than STATEHOUSE_SHUTDOWN_TIMEOUT (${shutdownTimeoutSeconds}s): the grace is part of the drain`,
    );
  }
  const shutdownGraceSeconds = Math.min(grace, shutdownTimeoutSeconds);
  return { shutdownTimeoutSeconds, shutdownGraceSeconds };
});

/** Human login through OpenID Connect. */
const oidcReader = reader(
  [
    'STATEHOUSE_OIDC_ISSUER',
    'STATEHOUSE_OIDC_CLIENT_ID',
    'STATEHOUSE_OIDC_SCOPES',
    'STATEHOUSE_OIDC_GROUPS_CLAIM',
  ],
  (r): AppConfig['oidc'] => {
    const oidcIssuer = r.url('STATEHOUSE_OIDC_ISSUER');
    const oidcClient = r.str('STATEHOUSE_OIDC_CLIENT_ID');
    if ((oidcIssuer === undefined) !== (oidcClient === undefined)) {
      r.problem('STATEHOUSE_OIDC_ISSUER and STATEHOUSE_OIDC_CLIENT_ID must be set together');
    } else if (oidcIssuer && oidcClient) {
      const scopes = (r.str('STATEHOUSE_OIDC_SCOPES') ?? 'openid email profile')
        .split(/[\s,]+/)
        .filter((x) => x !== '');
      if (!scopes.includes('openid')) r.problem('STATEHOUSE_OIDC_SCOPES must include openid');
      return {
        issuer: r.str('STATEHOUSE_OIDC_ISSUER') as string,
        clientId: oidcClient,
        scopes,
        groupsClaim: r.str('STATEHOUSE_OIDC_GROUPS_CLAIM') ?? 'groups',
      };
    }
    return undefined;
  },
);

/** Access-token signing (Ed25519) and token lifetimes. */
const tokensReader = reader(
  [
    'STATEHOUSE_TOKENS_PRIVATE_KEY_FILE',
    'STATEHOUSE_TOKENS_KID',
    'STATEHOUSE_TOKENS_ACCESS_TTL',
    'STATEHOUSE_TOKENS_REFRESH_TTL',
  ],
  (r): AppConfig['tokens'] => {
    let privateKeyPem: Secret | undefined;
    const keyFile = r.str('STATEHOUSE_TOKENS_PRIVATE_KEY_FILE');
    if (keyFile !== undefined) {
      try {
        const pem = readFileSync(keyFile, 'utf8');
        const key = createPrivateKey(pem);
        if (key.asymmetricKeyType !== 'ed25519') throw new Error('not an Ed25519 key');
        privateKeyPem = new Secret(pem);
      } catch (e) {
        r.problem(
          `STATEHOUSE_TOKENS_PRIVATE_KEY_FILE must be a readable PKCS#8 PEM Ed25519 private key (${(e as Error).message})`,
        );
      }
    }
    const tokenKid = r.str('STATEHOUSE_TOKENS_KID');
    if (tokenKid !== undefined && !/^[A-Za-z0-9_-]{1,64}$/.test(tokenKid)) {
      r.problem('STATEHOUSE_TOKENS_KID may only hold letters, digits, _ and - (at most 64)');
    }
    const accessTtlSeconds = r.duration('STATEHOUSE_TOKENS_ACCESS_TTL', 3600, 60, 86400);
    const refreshTtlSeconds = r.duration(
      'STATEHOUSE_TOKENS_REFRESH_TTL',
      30 * 86400,
      10,
      400 * 86400,
    );
    return { privateKeyPem, kid: tokenKid, accessTtlSeconds, refreshTtlSeconds };
  },
);

const STS_HMAC_PREFIX = 'STATEHOUSE_STS_HMAC_';

/** S3 credentials (STS), and the rate limit on the login and token endpoints. */
const stsReader = reader(
  ['STATEHOUSE_STS_KID', 'STATEHOUSE_STS_TTL', 'STATEHOUSE_AUTH_RATE_LIMIT'],
  (r) => {
    const stsKid = r.str('STATEHOUSE_STS_KID') ?? 'K1';
    if (!/^[A-Z0-9]{1,8}$/.test(stsKid)) {
      r.problem(
        'STATEHOUSE_STS_KID must be 1 to 8 upper-case letters or digits (it is part of the access key id)',
      );
    }
    const hmacKeys = new Map<string, Secret>();
    for (const [name, value] of r.prefixed(STS_HMAC_PREFIX)) {
      if (value === undefined) continue;
      const kid = name.slice(STS_HMAC_PREFIX.length);
      if (!/^[A-Z0-9]{1,8}$/.test(kid)) {
        r.problem(
          `${name}: the key id after STATEHOUSE_STS_HMAC_ must be 1 to 8 upper-case letters or digits`,
        );
        continue;
      }
      const raw = value.trim();
      if (!/^[A-Za-z0-9_-]+$/.test(raw) || Buffer.from(raw, 'base64url').length < 32) {
        r.problem(`${name} must be base64url and decode to at least 32 bytes`);
        continue;
      }
      hmacKeys.set(kid, new Secret(raw));
    }
    const stsTtlSeconds = r.duration('STATEHOUSE_STS_TTL', 900, 60, 12 * 3600);
    const authRateLimitPerMinute = r.int('STATEHOUSE_AUTH_RATE_LIMIT', 60, 1, 100_000);
    return {
      sts: { kid: stsKid, hmacKeys, ttlSeconds: stsTtlSeconds },
      authRateLimitPerMinute,
    };
  },
  [STS_HMAC_PREFIX],
);

/** The other base URLs the server is reached by (default: loopback at its port). */
const aliasesReader = reader(['STATEHOUSE_ALIASES'], (r, scheme: string, port: number) => {
  const aliases: string[] = [];
  const defaultAliases = r.str('STATEHOUSE_ALIASES') === undefined;
  if (defaultAliases) {
    aliases.push(`${scheme}://localhost:${port}`, `${scheme}://127.0.0.1:${port}`);
  } else {
    for (const a of r.list('STATEHOUSE_ALIASES', '')) {
      try {
        const u = new URL(a);
        if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new Error('scheme');
        if (u.search || u.hash || u.username || u.password) throw new Error('parts');
        aliases.push(trimEnd(a, '/'));
      } catch {
        r.problem(
          `STATEHOUSE_ALIASES: "${a}" must be a base URL like https://statehouse.internal:8443 (comma-separated)`,
        );
      }
    }
  }
  return { aliases, defaultAliases };
});

const failpointsReader = reader(['STATEHOUSE_TEST_FAILPOINTS'], (r) => {
  const failpoints = new Set<Failpoint>();
  for (const f of r.list('STATEHOUSE_TEST_FAILPOINTS', '')) {
    if ((FAILPOINTS as readonly string[]).includes(f)) failpoints.add(f as Failpoint);
    else
      r.problem(
        `STATEHOUSE_TEST_FAILPOINTS: "${f}" is not one of ${FAILPOINTS.join(', ')} (testing only)`,
      );
  }
  if (failpoints.size > 0) {
    r.warn(
      `STATEHOUSE_TEST_FAILPOINTS is set (${[...failpoints].join(', ')}): this process kills itself there. Testing only.`,
    );
  }
  return failpoints;
});

/** The `/s3` door's buckets and workspace prefixes (its own port is read with the server's). */
const s3DoorReader = reader(
  ['STATEHOUSE_S3_DOOR_BUCKETS', 'STATEHOUSE_S3_WORKSPACE_PREFIXES'],
  (r) => {
    const buckets = r.list('STATEHOUSE_S3_DOOR_BUCKETS', 'tfstate');
    for (const b of buckets) {
      if (!/^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/.test(b)) {
        r.problem(`STATEHOUSE_S3_DOOR_BUCKETS: "${b}" is not a valid S3 bucket name`);
      }
    }
    if (buckets.length === 0) r.problem('STATEHOUSE_S3_DOOR_BUCKETS must name at least one bucket');
    const workspacePrefixes = r.list('STATEHOUSE_S3_WORKSPACE_PREFIXES', 'env:');
    for (const p of workspacePrefixes) {
      if (!/^[A-Za-z0-9._:-]+$/.test(p)) {
        r.problem(
          `STATEHOUSE_S3_WORKSPACE_PREFIXES: "${p}" must be one path segment of letters, digits and . _ : -`,
        );
      } else if (!/[^A-Za-z0-9._-]/.test(p)) {
        r.warn(
          `STATEHOUSE_S3_WORKSPACE_PREFIXES: units whose names start with "${p}/" cannot be reached through /s3 (keys there name workspaces)`,
        );
      }
    }
    return { buckets, workspacePrefixes };
  },
);

/** Every reader loadConfig runs (it refuses to run one that is not here). */
const READERS: readonly Declared[] = [
  serverReader,
  databaseReader,
  storageReader,
  limitsReader,
  clientsReader,
  tlsReader,
  secretsReader,
  authSwitchReader,
  logReader,
  shutdownReader,
  oidcReader,
  tokensReader,
  stsReader,
  aliasesReader,
  failpointsReader,
  s3DoorReader,
];

/** Read by the CLI (`src/cli/`), not the server; known so that setting them draws no warning. */
const READ_BY_THE_CLI = ['STATEHOUSE_SERVER', 'STATEHOUSE_TOKEN'];

/** Every variable some reader reads, and the prefixes of those read by prefix. */
const KNOWN = new Set([...READERS.flatMap((r) => r.names), ...READ_BY_THE_CLI]);
const KNOWN_PREFIXES = READERS.flatMap((r) => r.prefixes);

/**
 * Reads and validates the environment. Collects every problem before failing so an operator
 * fixes them all in one go; the message names each bad variable but never echoes a secret.
 */
export function loadConfig(env: Env = process.env): AppConfig {
  const problems: string[] = [];
  const warnings: string[] = [];
  const run = <A extends unknown[], T>(r: Reader<A, T>, ...args: A): T => {
    // A reader left out of READERS would read variables that warn as unknown.
    if (!READERS.includes(r)) throw new Error('a config reader is missing from READERS');
    return r.read(accessors(env, r, problems, warnings), ...args);
  };

  for (const name of Object.keys(env)) {
    if (KNOWN_PREFIXES.some((prefix) => name.startsWith(prefix))) continue;
    if (name.startsWith('STATEHOUSE_') && !KNOWN.has(name)) {
      warnings.push(`unknown setting ${name} is ignored (check its spelling)`);
    }
  }

  // The readers run in this order, which is the order of the problems and warnings reported.
  const server = run(serverReader);
  const database = run(databaseReader);
  const storage = run(storageReader, server.dataDir, database.external);
  const limits = run(limitsReader);
  const clients = run(clientsReader);
  const { tls, scheme, publicUrl } = run(tlsReader, server.port);
  const secrets = run(secretsReader);
  const authDisabled = run(authSwitchReader, database.external, server.host);
  const log = run(logReader);
  const shutdown = run(shutdownReader);
  const oidc = run(oidcReader);
  const tokens = run(tokensReader);
  const sts = run(stsReader);
  const aliases = run(aliasesReader, scheme, server.port);
  const failpoints = run(failpointsReader);
  const s3Door = run(s3DoorReader);

  if (problems.length > 0) throw new ConfigError(problems);
  return {
    port: server.port,
    host: server.host,
    dataDir: server.dataDir,
    databaseUrl: database.databaseUrl,
    databasePoolSize: database.databasePoolSize,
    migrate: database.migrate,
    storage,
    maxVersions: limits.maxVersions,
    maxStateBytes: limits.maxStateBytes,
    inspection: limits.inspection,
    trustedProxies: clients.trustedProxies,
    corsOrigins: clients.corsOrigins,
    publicUrl,
    aliases: aliases.aliases,
    defaultAliases: aliases.defaultAliases,
    bootstrapToken: secrets.bootstrapToken,
    metricsToken: secrets.metricsToken,
    authDisabled,
    tls,
    logLevel: log.logLevel,
    logFormat: log.logFormat,
    logColor: log.logColor,
    shutdownTimeoutSeconds: shutdown.shutdownTimeoutSeconds,
    shutdownGraceSeconds: shutdown.shutdownGraceSeconds,
    oidc,
    tokens,
    sts: sts.sts,
    authRateLimitPerMinute: sts.authRateLimitPerMinute,
    s3Door: {
      port: server.s3Port,
      buckets: s3Door.buckets,
      workspacePrefixes: s3Door.workspacePrefixes,
    },
    failpoints,
    warnings,
  };
}

function checkToken(name: string, value: string, problems: string[]): Secret | undefined {
  if (value.length < 32) {
    problems.push(`${name} must be at least 32 characters long`);
    return undefined;
  }
  if (/\s/.test(value)) {
    problems.push(`${name} must not contain whitespace`);
    return undefined;
  }
  return new Secret(value);
}

export function isLoopback(host: string): boolean {
  return host === 'localhost' || host === '::1' || /^127\.\d+\.\d+\.\d+$/.test(host);
}

/** Injection token for the AppConfig object. */
export const APP_CONFIG = Symbol('APP_CONFIG');
