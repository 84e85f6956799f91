import { ChildProcess, spawn, SpawnOptions } from 'node:child_process';
import { accessSync, constants, statSync } from 'node:fs';
import { createServer } from 'node:net';
import { delimiter, join } from 'node:path';

/** Collects a child's stdout and stderr as they arrive; returns a reader of all of it so far. */
export function collectOutput(proc: ChildProcess): () => string {
  let out = '';
  proc.stdout?.on('data', (d: Buffer) => (out += d.toString()));
  proc.stderr?.on('data', (d: Buffer) => (out += d.toString()));
  return () => out;
}

/** The exit code, once the child has exited. */
export function exitCode(proc: ChildProcess): Promise<number | null> {
  return new Promise((res) => proc.once('exit', (code) => res(code)));
}

/** SIGTERM, and resolves once the child has exited (at once when it already had). */
export async function stopChild(proc: ChildProcess): Promise<void> {
  if (proc.exitCode !== null) return;
  const exited = new Promise((r) => proc.once('exit', r));
  proc.kill('SIGTERM');
  await exited;
}

/** A command started in a process group of its own, so that a test can see all of it end. */
export interface GroupProcess {
  proc: ChildProcess;
  /** The process group: the child's pid. */
  pgid: number;
  output: () => string;
  /** Exit code and signal, once it exited. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** SIGKILL to the whole group (for cleanup). */
  killGroup: () => void;
}

export function spawnGroup(
  command: string,
  args: string[],
  options: Omit<SpawnOptions, 'detached' | 'stdio'>,
): GroupProcess {
  const proc = spawn(command, args, {
    ...options,
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const output = collectOutput(proc);
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((res) =>
    proc.once('exit', (code, signal) => res({ code, signal })),
  );
  const pgid = proc.pid as number;
  return {
    proc,
    pgid,
    output,
    exited,
    killGroup: () => {
      try {
        process.kill(-pgid, 'SIGKILL');
      } catch {
        // already gone
      }
    },
  };
}

/** Whether any process of the group is still there. */
export function groupAlive(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Waits until `output()` says "listening on http://host:port" and returns the port. */
export async function listeningPort(
  output: () => string,
  exited: () => boolean,
  timeoutMs = 120_000,
): Promise<number> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const m = /listening on https?:\/\/[^:\s]+:(\d+)/.exec(output());
    if (m) return Number(m[1]);
    if (exited()) throw new Error(`exited before listening:\n${output()}`);
    if (Date.now() > deadline) throw new Error(`not listening after ${timeoutMs} ms:\n${output()}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Whether this process can listen on 127.0.0.1:`port` (nobody else does). */
export function portIsFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const probe = createServer();
    probe.once('error', () => resolve(false));
    probe.listen(port, '127.0.0.1', () => probe.close(() => resolve(true)));
  });
}

/** What a command run to its end said: its exit code and all it wrote. */
export interface CommandRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * Runs `command` with no stdin, collecting stdout and stderr, until it ends: at 'close' (its
 * output streams closed too) or at 'exit' (the process is gone, whoever still holds its pipes).
 * Rejects only when it cannot be started.
 */
export function runCommand(
  command: string,
  args: string[],
  options: { cwd: string; env: Record<string, string>; endsAt: 'close' | 'exit' },
): Promise<CommandRun> {
  return new Promise((resolve, reject) => {
    const p = spawn(command, args, {
      cwd: options.cwd,
      env: options.env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    p.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    p.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    p.once('error', reject);
    p.once(options.endsAt, (code: number | null) => resolve({ code, stdout, stderr }));
  });
}

/** Resolves after `ms` milliseconds. */
export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Polls `condition` every 50 ms until it holds or `timeoutMs` passed; returns whether it held. */
export async function eventually(
  condition: () => boolean | Promise<boolean>,
  timeoutMs: number,
): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await condition()) return true;
    if (Date.now() > deadline) return false;
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** The executable `tool` on the PATH, or undefined. */
export function onPath(tool: string): string | undefined {
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    if (dir === '') continue;
    try {
      const candidate = join(dir, tool);
      if (!statSync(candidate).isFile()) continue;
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // not here
    }
  }
  return undefined;
}
