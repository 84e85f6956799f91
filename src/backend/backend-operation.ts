import { queryHas } from '../common/query-has';
import type { BackendOperation } from '../metrics/metric-labels';

/**
 * The backend operation of a request, read like the backend's dispatch (`BackendController`):
 * LOCK/UNLOCK, or POST/PUT/DELETE on the URL with `?lock` for clients configured with other
 * lock methods.
 */
export function backendOperation(m: string, url: string): BackendOperation {
  const lockUrl = queryHas(url, 'lock');
  if (m === 'LOCK' || (lockUrl && (m === 'POST' || m === 'PUT'))) return 'lock';
  if (m === 'UNLOCK' || (lockUrl && m === 'DELETE')) return 'unlock';
  switch (m) {
    case 'GET':
      return 'get';
    case 'HEAD':
      return 'head';
    case 'POST':
    case 'PUT':
      return 'update';
    case 'DELETE':
      return 'delete';
    default:
      return 'unsupported';
  }
}
