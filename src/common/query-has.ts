/**
 * Whether the query of a raw URL has a parameter named `name` (with `value`, when given).
 * Scans the URL in place: this runs for every request, and allocates nothing.
 */
export function queryHas(url: string, name: string, value?: string): boolean {
  let at = url.indexOf('?');
  while (at >= 0) {
    const start = at + 1;
    const next = url.indexOf('&', start);
    const end = next < 0 ? url.length : next;
    if (url.startsWith(name, start)) {
      const after = start + name.length;
      if (value === undefined) {
        if (after === end || url[after] === '=') return true;
      } else if (
        url[after] === '=' &&
        end - after - 1 === value.length &&
        url.startsWith(value, after + 1)
      ) {
        return true;
      }
    }
    at = next;
  }
  return false;
}
