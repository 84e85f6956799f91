import type { ServerResponse } from 'node:http';
import { pipeline } from 'node:stream/promises';
import { sendWhole } from '../common/streams';
import type { OpenedState } from './state-types';

/** Streams a stored state as the answer, with its exact length and identity headers. */
export async function sendState(res: ServerResponse, opened: OpenedState): Promise<void> {
  const { version, body } = opened;
  res.statusCode = 200;
  res.setHeader('Content-Type', 'application/json');
  res.setHeader('Content-Length', String(version.size));
  res.setHeader('Content-MD5', Buffer.from(version.md5, 'hex').toString('base64'));
  res.setHeader('X-Statehouse-Version', String(version.version));
  res.setHeader('Cache-Control', 'no-store');
  if (sendWhole(res, body)) return;
  try {
    await pipeline(body, res);
  } catch {
    // The client went away, or the blob failed midway: the connection is cut, which a client
    // sees as a failed download (never as a short, valid-looking state).
    res.destroy();
  }
}
