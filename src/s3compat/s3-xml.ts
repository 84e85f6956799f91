/** Small, dependency-free builders for the S3 XML documents the door answers with. */
const ENTITIES: Record<string, string> = {
  '&': '&amp;',
  '<': '&lt;',
  '>': '&gt;',
  '"': '&quot;',
  "'": '&apos;',
};

// eslint-disable-next-line no-control-regex -- the allowed set is defined by control characters
const NOT_XML_CHAR = /[^\u0009\u000A\u000D\u0020-\uD7FF\uE000-\uFFFD\u{10000}-\u{10FFFF}]/gu;

export function escapeXml(value: string): string {
  // Characters XML 1.0 cannot carry at all are dropped rather than producing a broken document.
  return value.replace(NOT_XML_CHAR, '').replace(/[&<>"']/g, (c) => ENTITIES[c]);
}

export const XML_HEADER = '<?xml version="1.0" encoding="UTF-8"?>\n';
export const S3_NS = 'http://s3.amazonaws.com/doc/2006-03-01/';

/** `<name>value</name>`, escaped; undefined values are left out. */
export function el(name: string, value: string | number | boolean | undefined): string {
  return value === undefined ? '' : `<${name}>${escapeXml(String(value))}</${name}>`;
}

export function errorXml(
  code: string,
  message: string,
  resource: string,
  requestId: string,
): string {
  return (
    XML_HEADER +
    `<Error>${el('Code', code)}${el('Message', message)}${el('Resource', resource)}${el('RequestId', requestId)}</Error>`
  );
}
