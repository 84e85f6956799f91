import { closeSync, mkdirSync, openSync, readFileSync, utimesSync, writeSync } from 'node:fs';
import { isAbsolute, join, normalize, sep } from 'node:path';
import { gunzipSync } from 'node:zlib';

/** A snapshot that cannot be unpacked: truncated, corrupt, or not PGlite's tarball. */
export class SnapshotUnpackError extends Error {
  constructor(file: string, why: string) {
    super(`the PGlite snapshot ${file} cannot be unpacked: ${why}`);
    this.name = 'SnapshotUnpackError';
  }
}

const BLOCK = 512;
const REGULAR = new Set(['0', '\0']);
const DIRECTORY = '5';

/**
 * Unpacks the build's PGlite snapshot (`dumpDataDir('gzip')`: a gzipped ustar archive of the
 * data dir, names such as `/base/1/1259`) into `dir`, in this process — what
 * `PGlite.create({ loadDataDir })` does into its data dir, without starting a PostgreSQL to do it:
 * ~0.1 s and ~40 MiB of buffers instead of a child process with a WebAssembly instance of its own
 * (~1.5 s, ~400 MiB). Files are written 0600 and directories 0700: the cluster becomes the
 * server's database. Throws SnapshotUnpackError when the archive is truncated or corrupt
 * (gzip's CRC, each header's checksum, an entry running past the end, a name leaving `dir`);
 * the caller removes what was written.
 */
export function unpackSnapshot(file: string, dir: string): void {
  let tar: Buffer;
  try {
    tar = gunzipSync(readFileSync(file));
  } catch (e) {
    throw new SnapshotUnpackError(file, (e as Error).message);
  }
  let offset = 0;
  let entries = 0;
  let ended = false;
  while (offset + BLOCK <= tar.length) {
    const header = tar.subarray(offset, offset + BLOCK);
    if (header.every((b) => b === 0)) {
      ended = true; // the end-of-archive blocks
      break;
    }
    if (checksum(header) !== octal(header, 148, 8)) {
      throw new SnapshotUnpackError(file, `bad header checksum at byte ${offset}`);
    }
    const prefix = text(header, 345, 155);
    const name = (prefix ? `${prefix}/` : '') + text(header, 0, 100);
    const size = octal(header, 124, 12);
    const type = String.fromCharCode(header[156]);
    const mtime = octal(header, 136, 12);
    offset += BLOCK;
    if (!Number.isSafeInteger(size) || !Number.isFinite(mtime)) {
      throw new SnapshotUnpackError(file, `bad header at byte ${offset - BLOCK}`);
    }
    if (offset + size > tar.length) throw new SnapshotUnpackError(file, `${name} is truncated`);
    const target = inside(dir, name, file);
    if (type === DIRECTORY) {
      mkdirSync(target, { recursive: true, mode: 0o700 });
    } else if (REGULAR.has(type)) {
      mkdirSync(join(target, '..'), { recursive: true, mode: 0o700 });
      const fd = openSync(target, 'w', 0o600);
      try {
        if (size > 0) writeSync(fd, tar, offset, size);
      } finally {
        closeSync(fd);
      }
      utimesSync(target, mtime, mtime);
    } else {
      throw new SnapshotUnpackError(file, `${name} is of an unexpected type (${type})`);
    }
    entries++;
    offset += Math.ceil(size / BLOCK) * BLOCK;
  }
  if (!ended || entries === 0) throw new SnapshotUnpackError(file, 'the archive ends early');
}

/** `name` resolved under `dir`; refuses one that would leave it. */
function inside(dir: string, name: string, file: string): string {
  const relative = normalize(name.replace(/^\/+/, ''));
  if (relative === '' || relative === '.' || isAbsolute(relative) || relative.startsWith(`..`)) {
    throw new SnapshotUnpackError(file, `unexpected entry name ${JSON.stringify(name)}`);
  }
  if (relative.split(sep).includes('..')) {
    throw new SnapshotUnpackError(file, `unexpected entry name ${JSON.stringify(name)}`);
  }
  return join(dir, relative);
}

function text(header: Buffer, start: number, length: number): string {
  const field = header.subarray(start, start + length);
  const end = field.indexOf(0);
  return field.toString('utf8', 0, end < 0 ? length : end);
}

function octal(header: Buffer, start: number, length: number): number {
  const digits = text(header, start, length).trim();
  return digits === '' ? 0 : parseInt(digits, 8);
}

/** The ustar header checksum: every byte summed, the checksum field counted as spaces. */
function checksum(header: Buffer): number {
  let sum = 0;
  for (let i = 0; i < BLOCK; i++) sum += i >= 148 && i < 156 ? 0x20 : header[i];
  return sum;
}
