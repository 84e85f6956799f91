import { LoggerService } from '@nestjs/common';
import { Logger, Params, PinoLogger } from 'nestjs-pino';
import pino, { DestinationStream } from 'pino';
import type { Options } from 'pino-http';
import type { AppConfig } from '../config/config';
import { loggerParams } from './logging';

/**
 * Where the log goes and how it reads: JSON lines (for machines: STATEHOUSE_LOG_FORMAT=json, or
 * `auto` when stdout is not a terminal), or one human-readable line per event (`text`, or `auto`
 * on a terminal) with colours only on a terminal. Either way every line is written
 * synchronously as it happens, so it carries its own time and keeps its place among what the
 * process writes to stderr.
 */

const LEVEL_NAMES: Record<number, string> = {
  10: 'TRACE',
  20: 'DEBUG',
  30: 'INFO',
  40: 'WARN',
  50: 'ERROR',
  60: 'FATAL',
};
const LEVEL_COLOURS: Record<number, string> = {
  10: '90',
  20: '90',
  30: '32',
  40: '33',
  50: '31',
  60: '35',
};
/** Fields the text line shows in its own way (or, like pid and hostname, not at all). */
const SHOWN_APART = new Set([
  'level',
  'time',
  'pid',
  'hostname',
  'service',
  'context',
  'msg',
  'req',
  'res',
  'responseTime',
  'err',
]);
const PINO_HTTP_MESSAGES = new Set(['request completed', 'request errored', 'request aborted']);

type LogRecord = Record<string, unknown>;

/** Control characters (a terminal would obey them) written as JSON escapes. */
function printable(text: string): string {
  // eslint-disable-next-line no-control-regex
  return text.replace(/[\u0000-\u001f\u007f-\u009f]/g, (c) => JSON.stringify(c).slice(1, -1));
}

function paint(colour: boolean, code: string, text: string): string {
  return colour ? `\x1b[${code}m${text}\x1b[0m` : text;
}

function localTime(epochMs: number): string {
  const d = new Date(epochMs);
  const two = (n: number) => String(n).padStart(2, '0');
  return (
    `${d.getFullYear()}-${two(d.getMonth() + 1)}-${two(d.getDate())} ` +
    `${two(d.getHours())}:${two(d.getMinutes())}:${two(d.getSeconds())}.` +
    String(d.getMilliseconds()).padStart(3, '0')
  );
}

function fieldValue(value: unknown): string {
  if (typeof value === 'string') return /^[^\s"=]+$/.test(value) ? value : JSON.stringify(value);
  return JSON.stringify(value) ?? 'undefined';
}

/** A string as it is, anything else as JSON. */
function asText(value: unknown): string {
  return typeof value === 'string' ? value : (JSON.stringify(value) ?? 'undefined');
}

/** One log record (as pino writes it) as one line for a person. Pure. */
export function formatLogLine(record: LogRecord, colour: boolean): string {
  const level = typeof record.level === 'number' ? record.level : 30;
  const time = typeof record.time === 'number' ? localTime(record.time) : '';
  // What the record says is made printable first; only then is it painted.
  const parts: string[] = [
    paint(colour, '2', time),
    paint(colour, LEVEL_COLOURS[level] ?? '0', (LEVEL_NAMES[level] ?? String(level)).padEnd(5)),
  ];
  const req = record.req as { id?: unknown; method?: unknown; url?: unknown } | undefined;
  const res = record.res as { statusCode?: unknown } | undefined;
  const context = typeof record.context === 'string' ? record.context : req ? 'http' : undefined;
  if (context) parts.push(paint(colour, '36', `${printable(context)}:`));

  const msg = typeof record.msg === 'string' ? record.msg : '';
  if (req && PINO_HTTP_MESSAGES.has(msg)) {
    const took = typeof record.responseTime === 'number' ? ` in ${record.responseTime} ms` : '';
    const status = res?.statusCode !== undefined ? ` → ${asText(res.statusCode)}` : '';
    const aborted = msg === 'request completed' ? '' : ` (${msg.replace('request ', '')})`;
    parts.push(printable(`${asText(req.method)} ${asText(req.url)}${status}${took}${aborted}`));
  } else if (msg !== '') {
    parts.push(printable(msg));
  }
  const err = record.err as { type?: unknown; message?: unknown; stack?: unknown } | undefined;
  if (err && typeof err === 'object') {
    const where = typeof err.stack === 'string' ? firstFrame(err.stack) : undefined;
    parts.push(
      printable(
        `— ${asText(err.type ?? 'Error')}: ${asText(err.message ?? '')}${where ? ` (at ${where})` : ''}`,
      ),
    );
  }
  for (const [key, value] of Object.entries(record)) {
    if (SHOWN_APART.has(key) || value === undefined) continue;
    parts.push(`${paint(colour, '2', `${printable(key)}=`)}${printable(fieldValue(value))}`);
  }
  if (req?.id !== undefined) parts.push(paint(colour, '2', `request=${printable(asText(req.id))}`));
  return parts.filter((p) => p !== '').join(' ');
}

/** Writes each JSON line pino produces as one text line. */
class TextDestination implements DestinationStream {
  constructor(
    private readonly out: NodeJS.WriteStream,
    private readonly colour: boolean,
  ) {}

  write(line: string): void {
    let text: string;
    try {
      text = formatLogLine(JSON.parse(line) as LogRecord, this.colour);
    } catch {
      text = printable(line.trimEnd());
    }
    this.out.write(`${text}\n`);
  }
}

let jsonDestination: DestinationStream | undefined;

/** The destination the configured format asks for, given where stdout goes. */
export function logDestination(
  config: Pick<AppConfig, 'logFormat' | 'logColor'>,
  out: NodeJS.WriteStream = process.stdout,
): DestinationStream {
  const terminal = out.isTTY === true;
  if (config.logFormat === 'text' || (config.logFormat === 'auto' && terminal)) {
    return new TextDestination(out, config.logColor && terminal);
  }
  // One synchronous destination for every logger of the process: lines stay whole and in order.
  jsonDestination ??= pino.destination({ dest: (out as { fd?: number }).fd ?? 1, sync: true });
  return jsonDestination;
}

/** nestjs-pino's parameters with the configured destination. */
export function appLoggerParams(config: AppConfig): Params {
  return {
    pinoHttp: [loggerParams(config).pinoHttp as Options, logDestination(config)],
  };
}

/**
 * Nest's own start-up chatter — each module initialised, each route mapped, "starting",
 * "started" — is debug-level, and so is its report of an error thrown while the modules start:
 * the command reports that failure itself, once.
 */
const NEST_INTERNALS = new Set([
  'InstanceLoader',
  'RoutesResolver',
  'RouterExplorer',
  'NestFactory',
  'NestApplication',
  'ExceptionHandler',
]);

function isNestInternal(params: unknown[]): boolean {
  const context = params[params.length - 1];
  return typeof context === 'string' && NEST_INTERNALS.has(context);
}

/** The logger the whole process uses, from before the first module starts. */
export class AppLogger implements LoggerService {
  private readonly inner: Logger;

  constructor(config: AppConfig) {
    const params = appLoggerParams(config);
    this.inner = new Logger(new PinoLogger(params), params);
  }

  log(message: unknown, ...params: unknown[]): void {
    if (isNestInternal(params)) this.inner.debug(message, ...params);
    else this.inner.log(message, ...params);
  }

  error(message: unknown, ...params: unknown[]): void {
    if (isNestInternal(params)) this.inner.debug(message, ...params);
    else this.inner.error(message, ...params);
  }

  warn(message: unknown, ...params: unknown[]): void {
    this.inner.warn(message, ...params);
  }

  debug(message: unknown, ...params: unknown[]): void {
    this.inner.debug(message, ...params);
  }

  verbose(message: unknown, ...params: unknown[]): void {
    this.inner.verbose(message, ...params);
  }

  fatal(message: unknown, ...params: unknown[]): void {
    this.inner.fatal(message, ...params);
  }
}

/** The first `at …` frame of a stack (after its message line), without a regular expression. */
function firstFrame(stack: string): string | undefined {
  for (const line of stack.split('\n').slice(1)) {
    const t = line.trimStart();
    if (t.startsWith('at ') && t.length > 3 && t !== line) return t.slice(3);
  }
  return undefined;
}
