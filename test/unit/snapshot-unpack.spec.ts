import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { SnapshotUnpackError, unpackSnapshot } from '../../src/database/snapshot-unpack';

/** One ustar header (as PGlite's `dumpDataDir` writes them) followed by the entry's data. */
function entry(name: string, data: Buffer | undefined, type = data ? '0' : '5'): Buffer {
  const header = Buffer.alloc(512);
  header.write(name, 0, 100, 'utf8');
  header.write('0000600\0', 100);
  header.write('0000000\0', 108);
  header.write('0000000\0', 116);
  header.write(`${(data?.length ?? 0).toString(8).padStart(11, '0')}\0`, 124);
  header.write(`${(1_700_000_000).toString(8).padStart(11, '0')}\0`, 136);
  header.write(type, 156);
  header.write('ustar\0' + '00', 257);
  header.fill(0x20, 148, 156);
  let sum = 0;
  for (const b of header) sum += b;
  header.write(`${sum.toString(8).padStart(6, '0')}\0 `, 148);
  const padded = data ? Buffer.alloc(Math.ceil(data.length / 512) * 512) : Buffer.alloc(0);
  data?.copy(padded);
  return Buffer.concat([header, padded]);
}

const END = Buffer.alloc(1024);

describe('unpacking the PGlite snapshot in the server process', () => {
  const dirs: string[] = [];
  const tempDir = () => {
    const d = mkdtempSync(join(tmpdir(), 'statehouse-unpack-'));
    dirs.push(d);
    return d;
  };
  afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

  const archive = (...parts: Buffer[]) => {
    const file = join(tempDir(), 'pglite-test.tar.gz');
    writeFileSync(file, gzipSync(Buffer.concat(parts)));
    return file;
  };

  it('writes the directories and files under the target, owner-only, with their times', () => {
    const file = archive(
      entry('/base', undefined),
      entry('/base/1/1259', Buffer.from('x'.repeat(700))),
      entry('/PG_VERSION', Buffer.from('17\n')),
      entry('/empty', Buffer.alloc(0)),
      END,
    );
    const dir = tempDir();
    unpackSnapshot(file, dir);
    expect(readdirSync(dir).sort()).toEqual(['PG_VERSION', 'base', 'empty']);
    expect(readFileSync(join(dir, 'base/1/1259'), 'utf8')).toBe('x'.repeat(700));
    expect(readFileSync(join(dir, 'PG_VERSION'), 'utf8')).toBe('17\n');
    expect(statSync(join(dir, 'empty')).size).toBe(0);
    expect(statSync(join(dir, 'PG_VERSION')).mode & 0o777).toBe(0o600);
    expect(statSync(join(dir, 'base')).mode & 0o777).toBe(0o700);
    expect(statSync(join(dir, 'base/1')).mode & 0o777).toBe(0o700);
    expect(statSync(join(dir, 'PG_VERSION')).mtimeMs).toBe(1_700_000_000_000);
  });

  it('refuses a truncated archive (gzip ends early)', () => {
    const whole = gzipSync(Buffer.concat([entry('/PG_VERSION', Buffer.from('17\n')), END]));
    const file = join(tempDir(), 'pglite-test.tar.gz');
    writeFileSync(file, whole.subarray(0, whole.length - 20));
    expect(() => unpackSnapshot(file, tempDir())).toThrow(SnapshotUnpackError);
  });

  it('refuses an archive whose last entry is cut short, or that has no end', () => {
    const cut = entry('/base/1/1259', Buffer.alloc(2048, 1)).subarray(0, 1024);
    expect(() => unpackSnapshot(archive(cut), tempDir())).toThrow(/is truncated/);
    expect(() =>
      unpackSnapshot(archive(entry('/PG_VERSION', Buffer.from('17'))), tempDir()),
    ).toThrow(/ends early/);
  });

  it('refuses a header whose checksum does not match', () => {
    const bad = entry('/PG_VERSION', Buffer.from('17\n'));
    bad[0] = '_'.charCodeAt(0); // the name changed after the checksum was written
    expect(() => unpackSnapshot(archive(bad, END), tempDir())).toThrow(/checksum/);
  });

  it('refuses names that leave the target and types it does not expect', () => {
    const outside = archive(entry('/../escaped', Buffer.from('no')), END);
    const dir = tempDir();
    expect(() => unpackSnapshot(outside, join(dir, 'in'))).toThrow(/unexpected entry name/);
    expect(readdirSync(dir)).toEqual([]);
    const link = archive(entry('/link', Buffer.alloc(0), '2'), END);
    expect(() => unpackSnapshot(link, tempDir())).toThrow(/unexpected type/);
  });
});
