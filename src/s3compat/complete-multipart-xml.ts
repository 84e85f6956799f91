import { S3Error } from './s3-errors';

/**
 * The body of `CompleteMultipartUpload`, read by a small XML scanner that looks at each
 * character a bounded number of times (no regular expression, no backtracking, no DTD):
 *
 *   <CompleteMultipartUpload xmlns="…">
 *     <Part><PartNumber>1</PartNumber><ETag>"…"</ETag><ChecksumCRC32>…</ChecksumCRC32></Part>…
 *   </CompleteMultipartUpload>
 *
 * It accepts what S3 clients write — an XML declaration, comments, whitespace, namespace
 * prefixes, attributes, CDATA, and character references (Go's encoder writes `&#34;` for the
 * quotes of an ETag) — and refuses anything else with `MalformedXML` naming what is wrong. Work
 * and memory are bounded by the limits below whatever the input: the body size (the caller reads
 * at most `maxBytes`), the nesting depth, the part count and the length of one text value.
 */
export interface CompleteXmlLimits {
  maxBytes: number;
  maxParts: number;
  /** Elements inside elements: the schema needs 3 (document, Part, field). */
  maxDepth: number;
  /** Characters of one element's text (an ETag is 34, a SHA-256 checksum 44). */
  maxText: number;
}

export const COMPLETE_XML_LIMITS: CompleteXmlLimits = {
  maxBytes: 1024 * 1024,
  maxParts: 10_000,
  maxDepth: 3,
  maxText: 1024,
};

export interface RequestedPart {
  partNumber: number;
  /** The ETag without quotes, lower-cased (the part's MD5 in hex). */
  etag: string;
}

const ROOT = 'CompleteMultipartUpload';

function malformed(detail: string): S3Error {
  return new S3Error(
    'MalformedXML',
    `The XML you provided was not well-formed or did not validate against our published schema: ${detail}`,
  );
}

/** `<CompleteMultipartUpload>`'s parts, in the order given; strictly ascending part numbers. */
export function parseCompleteMultipartXml(
  body: Buffer,
  limits: CompleteXmlLimits = COMPLETE_XML_LIMITS,
): RequestedPart[] {
  if (body.length > limits.maxBytes) {
    throw new S3Error('EntityTooLarge', `the part list is larger than ${limits.maxBytes} bytes`);
  }
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true, ignoreBOM: false }).decode(body);
  } catch {
    throw malformed('the document is not UTF-8');
  }
  const parts: RequestedPart[] = [];
  let part: { partNumber?: number; etag?: string } | undefined;
  scanXml(text, limits, {
    open(path) {
      const name = path[path.length - 1];
      if (path.length === 1 && name !== ROOT) throw malformed(`the document is not <${ROOT}>`);
      if (path.length === 2 && name === 'Part') {
        if (parts.length === limits.maxParts) {
          throw malformed(`more than ${limits.maxParts} parts`);
        }
        part = {};
      }
    },
    close(path, value) {
      const name = path[path.length - 1];
      if (path.length === 2 && name === 'Part' && part) {
        if (part.partNumber === undefined || part.etag === undefined) {
          throw malformed('every Part needs a PartNumber and an ETag');
        }
        parts.push({ partNumber: part.partNumber, etag: part.etag });
        part = undefined;
        return;
      }
      if (path.length !== 3 || path[1] !== 'Part' || !part) return; // not part of the schema
      if (name === 'PartNumber') {
        if (part.partNumber !== undefined) throw malformed('a Part has two PartNumbers');
        part.partNumber = partNumberOf(value);
      } else if (name === 'ETag') {
        if (part.etag !== undefined) throw malformed('a Part has two ETags');
        part.etag = unquote(value.trim()).toLowerCase();
      }
    },
  });
  if (parts.length === 0) throw malformed('the part list is empty');
  for (let i = 1; i < parts.length; i++) {
    if (parts[i].partNumber <= parts[i - 1].partNumber) {
      throw new S3Error(
        'InvalidPartOrder',
        'The list of parts was not in ascending order. Parts must be ordered by part number.',
      );
    }
  }
  return parts;
}

function partNumberOf(value: string): number {
  const v = value.trim();
  if (v.length === 0 || v.length > 5)
    throw malformed('a PartNumber is not a number from 1 to 10000');
  for (let i = 0; i < v.length; i++) {
    const c = v.charCodeAt(i);
    if (c < 0x30 || c > 0x39) throw malformed('a PartNumber is not a number from 1 to 10000');
  }
  const n = Number(v);
  if (n < 1 || n > 10_000) throw malformed('a PartNumber is not a number from 1 to 10000');
  return n;
}

function unquote(v: string): string {
  return v.length >= 2 && v.startsWith('"') && v.endsWith('"') ? v.slice(1, -1) : v;
}

// ---------------------------------------------------------------------------------- scanner

export interface XmlHandler {
  /** An element opened; `path` is the local names from the document element down. */
  open(path: readonly string[]): void;
  /** An element closed, with its text (character data of a leaf; '' when it has children). */
  close(path: readonly string[], text: string): void;
}

const NAMED: Record<string, string> = { quot: '"', amp: '&', lt: '<', gt: '>', apos: "'" };

/**
 * Walks an XML document once, left to right. Every search (`indexOf`) starts where the previous
 * one ended and the cursor only moves forward, so the work is linear in the input. Refused:
 * DTDs (`<!DOCTYPE`: no entities beyond XML's five), unbalanced or mismatched tags, text outside
 * the document element, nesting deeper than `maxDepth`, text longer than `maxText`.
 */
export function scanXml(xml: string, limits: CompleteXmlLimits, handler: XmlHandler): void {
  const path: string[] = [];
  let text = '';
  let textBlank = true;
  let hasChildren = false;
  let seenRoot = false;
  let i = xml.charCodeAt(0) === 0xfeff ? 1 : 0;
  const n = xml.length;

  const addText = (piece: string): void => {
    const blank = isBlank(piece);
    if (path.length === 0) {
      if (!blank) throw malformed('there is text outside the document element');
      return;
    }
    // White space between elements is kept only up to the cap (it is never a value).
    if (blank && textBlank) {
      if (text.length < limits.maxText) text += piece;
      return;
    }
    if (text.length + piece.length > limits.maxText) {
      throw malformed(`an element's text is longer than ${limits.maxText} characters`);
    }
    text += piece;
    textBlank = textBlank && blank;
  };

  while (i < n) {
    const lt = xml.indexOf('<', i);
    if (lt < 0) {
      addText(decodeReferences(xml.slice(i)));
      break;
    }
    if (lt > i) addText(decodeReferences(xml.slice(i, lt)));
    if (xml.startsWith('<!--', lt)) {
      const end = xml.indexOf('-->', lt + 4);
      if (end < 0) throw malformed('a comment is not closed');
      i = end + 3;
    } else if (xml.startsWith('<?', lt)) {
      const end = xml.indexOf('?>', lt + 2);
      if (end < 0) throw malformed('a processing instruction is not closed');
      i = end + 2;
    } else if (xml.startsWith('<![CDATA[', lt)) {
      if (path.length === 0) throw malformed('CDATA outside the document element');
      const end = xml.indexOf(']]>', lt + 9);
      if (end < 0) throw malformed('a CDATA section is not closed');
      addText(xml.slice(lt + 9, end));
      i = end + 3;
    } else if (xml.startsWith('<!', lt)) {
      throw malformed('document type declarations are not accepted');
    } else if (xml.startsWith('</', lt)) {
      const gt = xml.indexOf('>', lt + 2);
      if (gt < 0) throw malformed('an end tag is not closed');
      const name = xml.slice(lt + 2, gt).trimEnd();
      const open = path[path.length - 1];
      if (open === undefined) throw malformed(`</${clip(name)}> closes nothing`);
      if (localName(name) !== open || !isName(name)) {
        throw malformed(`</${clip(name)}> does not close <${open}>`);
      }
      if (hasChildren && !textBlank) throw malformed(`<${open}> mixes text and elements`);
      handler.close(path, hasChildren ? '' : text);
      path.pop();
      text = '';
      textBlank = true;
      hasChildren = true; // the parent has (at least) this child
      i = gt + 1;
    } else {
      const tag = readStartTag(xml, lt);
      if (path.length === 0 && seenRoot) throw malformed('there are two document elements');
      if (path.length > 0 && !textBlank) {
        throw malformed(`<${path[path.length - 1]}> mixes text and elements`);
      }
      if (path.length === limits.maxDepth) {
        throw malformed(`elements are nested deeper than ${limits.maxDepth} levels`);
      }
      seenRoot = true;
      path.push(localName(tag.name));
      handler.open(path);
      text = '';
      textBlank = true;
      hasChildren = false;
      if (tag.selfClosing) {
        handler.close(path, '');
        path.pop();
        hasChildren = true;
      }
      i = tag.end;
    }
  }
  if (path.length > 0) throw malformed(`the document ended inside <${path[path.length - 1]}>`);
  if (!seenRoot) throw malformed('there is no document element');
}

/** A start tag at `lt`: its name, and where it ends; attributes are checked and skipped. */
function readStartTag(
  xml: string,
  lt: number,
): { name: string; selfClosing: boolean; end: number } {
  let i = lt + 1;
  const nameStart = i;
  while (i < xml.length && isNameChar(xml.charCodeAt(i))) i++;
  const name = xml.slice(nameStart, i);
  if (!isName(name)) throw malformed('a tag has no valid name');
  for (;;) {
    const spaced = i < xml.length && isSpace(xml.charCodeAt(i));
    while (i < xml.length && isSpace(xml.charCodeAt(i))) i++;
    if (i >= xml.length) throw malformed(`<${clip(name)}> is not closed`);
    const c = xml[i];
    if (c === '>') return { name, selfClosing: false, end: i + 1 };
    if (c === '/') {
      if (xml[i + 1] !== '>') throw malformed(`<${clip(name)}> is not closed`);
      return { name, selfClosing: true, end: i + 2 };
    }
    // An attribute: name = "value" (or 'value'), after white space.
    if (!spaced) throw malformed(`<${clip(name)}> has a malformed attribute`);
    const attrStart = i;
    while (i < xml.length && isNameChar(xml.charCodeAt(i))) i++;
    if (!isName(xml.slice(attrStart, i)))
      throw malformed(`<${clip(name)}> has a malformed attribute`);
    while (i < xml.length && isSpace(xml.charCodeAt(i))) i++;
    if (xml[i] !== '=') throw malformed(`<${clip(name)}> has a malformed attribute`);
    i++;
    while (i < xml.length && isSpace(xml.charCodeAt(i))) i++;
    const quote = xml[i];
    if (quote !== '"' && quote !== "'")
      throw malformed(`<${clip(name)}> has a malformed attribute`);
    const close = xml.indexOf(quote, i + 1);
    if (close < 0) throw malformed(`<${clip(name)}> has an attribute that is not closed`);
    const value = xml.slice(i + 1, close);
    if (value.includes('<')) throw malformed(`<${clip(name)}> has a malformed attribute`);
    decodeReferences(value); // well-formed references only
    i = close + 1;
  }
}

/**
 * Character data with XML's five entity references and numeric character references decoded;
 * any other `&` is a well-formedness error. Each `&` looks at most 10 characters ahead.
 */
export function decodeReferences(raw: string): string {
  let amp = raw.indexOf('&');
  if (amp < 0) return raw;
  let out = '';
  let from = 0;
  while (amp >= 0) {
    let semi = amp + 1;
    while (semi < raw.length && semi - amp <= 10 && raw[semi] !== ';') semi++;
    if (raw[semi] !== ';') throw malformed('an "&" does not start a reference');
    const ref = raw.slice(amp + 1, semi);
    out += raw.slice(from, amp) + referenceValue(ref);
    from = semi + 1;
    amp = raw.indexOf('&', from);
  }
  return out + raw.slice(from);
}

function referenceValue(ref: string): string {
  const named = Object.prototype.hasOwnProperty.call(NAMED, ref) ? NAMED[ref] : undefined;
  if (named !== undefined) return named;
  let cp = NaN;
  if (ref.startsWith('#x') && ref.length > 2 && isDigits(ref.slice(2), 16)) {
    cp = parseInt(ref.slice(2), 16);
  } else if (ref.startsWith('#') && ref.length > 1 && isDigits(ref.slice(1), 10)) {
    cp = parseInt(ref.slice(1), 10);
  }
  const allowed =
    cp === 0x9 ||
    cp === 0xa ||
    cp === 0xd ||
    (cp >= 0x20 && cp <= 0xd7ff) ||
    (cp >= 0xe000 && cp <= 0xfffd) ||
    (cp >= 0x10000 && cp <= 0x10ffff);
  if (!allowed) throw malformed(`"&${clip(ref)};" is not a reference XML allows`);
  return String.fromCodePoint(cp);
}

function isDigits(s: string, radix: 10 | 16): boolean {
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    const digit = c >= 0x30 && c <= 0x39;
    const hex = (c >= 0x41 && c <= 0x46) || (c >= 0x61 && c <= 0x66);
    if (!digit && !(radix === 16 && hex)) return false;
  }
  return true;
}

function localName(qualified: string): string {
  const colon = qualified.indexOf(':');
  return colon < 0 ? qualified : qualified.slice(colon + 1);
}

function isName(s: string): boolean {
  if (s.length === 0 || s.length > 256) return false;
  const first = s.charCodeAt(0);
  return !(first >= 0x30 && first <= 0x39) && first !== 0x2d && first !== 0x2e;
}

/** Name characters (ASCII letters, digits, `_ - . :` and anything beyond ASCII). */
function isNameChar(c: number): boolean {
  return (
    (c >= 0x61 && c <= 0x7a) ||
    (c >= 0x41 && c <= 0x5a) ||
    (c >= 0x30 && c <= 0x39) ||
    c === 0x5f ||
    c === 0x2d ||
    c === 0x2e ||
    c === 0x3a ||
    c > 0x7f
  );
}

function isSpace(c: number): boolean {
  return c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0d;
}

function isBlank(s: string): boolean {
  for (let i = 0; i < s.length; i++) if (!isSpace(s.charCodeAt(i))) return false;
  return true;
}

/** A piece of the input quoted in an error message, kept short. */
function clip(s: string): string {
  return s.length > 40 ? `${s.slice(0, 40)}…` : s;
}
