import { createHash, randomBytes } from 'node:crypto';
import { createReadStream, createWriteStream, renameSync, rmSync, statSync } from 'node:fs';
import { once } from 'node:events';
import { basename, dirname, join } from 'node:path';
import { Readable, Writable } from 'node:stream';
import { finished } from 'node:stream/promises';
import type { RawBody } from './client';
import { CliError } from './errors';

/** A state file as a raw request body, streamed (not read into memory); `-` is stdin. */
export function fileBody(file: string): () => RawBody {
  if (file === '-') {
    let used = false;
    return () => {
      if (used) throw new CliError('cannot send standard input twice; push from a file instead');
      used = true;
      return {
        data: Readable.toWeb(process.stdin) as ReadableStream<Uint8Array>,
        contentType: 'application/json',
      };
    };
  }
  let size: number;
  try {
    const st = statSync(file);
    if (!st.isFile()) throw new CliError(`${file} is not a file`, 2);
    size = st.size;
  } catch (e) {
    if (e instanceof CliError) throw e;
    throw new CliError(`cannot read ${file}: ${(e as Error).message}`, 2);
  }
  return () => ({
    data: Readable.toWeb(createReadStream(file)) as ReadableStream<Uint8Array>,
    length: size,
    contentType: 'application/json',
  });
}

async function writeAll(
  body: ReadableStream<Uint8Array>,
  sink: Writable,
): Promise<{ size: number; md5: Buffer }> {
  const md5 = createHash('md5');
  let size = 0;
  let sinkError: Error | undefined;
  const onError = (e: Error): void => {
    sinkError = e;
  };
  sink.on('error', onError);
  try {
    for await (const chunk of body) {
      if (sinkError) throw sinkError;
      md5.update(chunk);
      size += chunk.length;
      if (!sink.write(chunk)) await once(sink, 'drain');
    }
    if (sinkError) throw sinkError;
  } catch (e) {
    if (sinkError) throw sinkError;
    throw new CliError(`the download was cut off: ${(e as Error).message}`);
  } finally {
    sink.off('error', onError);
  }
  return { size, md5: md5.digest() };
}

function checkIntegrity(res: Response, got: { size: number; md5: Buffer }): void {
  const length = res.headers.get('content-length');
  if (length !== null && Number(length) !== got.size) {
    throw new CliError(`the download is incomplete: ${got.size} of ${length} bytes`);
  }
  const md5 = res.headers.get('content-md5');
  if (md5 !== null && Buffer.from(md5, 'base64').compare(got.md5) !== 0) {
    throw new CliError('the download does not match its Content-MD5: not written');
  }
}

/**
 * Writes a state answer byte for byte: to stdout, or to a file through a temporary file that
 * replaces it only once every byte arrived and the checksum matched (mode 0600: states hold
 * secrets). Returns the number of bytes.
 */
export async function saveBody(res: Response, file: string | undefined): Promise<number> {
  if (!res.body) throw new CliError('the server sent no content');
  if (file === undefined || file === '-') {
    const got = await writeAll(res.body, process.stdout);
    checkIntegrity(res, got);
    return got.size;
  }
  const tmp = join(dirname(file), `.${basename(file)}.${randomBytes(4).toString('hex')}.tmp`);
  const sink = createWriteStream(tmp, { flags: 'wx', mode: 0o600 });
  try {
    await once(sink, 'open');
    const got = await writeAll(res.body, sink);
    sink.end();
    await finished(sink);
    checkIntegrity(res, got);
    renameSync(tmp, file);
    return got.size;
  } catch (e) {
    sink.destroy();
    rmSync(tmp, { force: true });
    if (e instanceof CliError) throw e;
    throw new CliError(`cannot write ${file}: ${(e as Error).message}`);
  }
}
