import type { ChildProcess } from 'node:child_process';

/** The example nginx configuration run for real (scripts/nginx-example.js, shared with the bench). */
export interface Rendering {
  /** Where nginx listens (TLS), on 127.0.0.1. */
  port: number;
  /** The replicas' ports on 127.0.0.1 (the example names two upstream servers). */
  upstreams: [number, number];
  cert: string;
  key: string;
  /** Further replacements after the standard ones (each must match exactly once). */
  edits?: [string, string][];
}

export interface RunningNginx {
  port: number;
  url: string;
  proc: ChildProcess;
  /** nginx's access log so far: `method URI status upstream-address upstream-status` lines. */
  accessLog: () => string;
  errorLog: () => string;
  stop: () => Promise<void>;
}

// eslint-disable-next-line @typescript-eslint/no-require-imports
const example = require('../../scripts/nginx-example') as {
  NGINX_EXAMPLE: string;
  NGINX_MISSING: string;
  findNginx: () => string | undefined;
  renderExample: (r: Rendering) => string;
  startNginx: (dir: string, port: number, site: string) => Promise<RunningNginx>;
};

export const { NGINX_EXAMPLE, NGINX_MISSING, findNginx, renderExample, startNginx } = example;
