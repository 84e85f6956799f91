import { formatLogLine, logDestination } from '../../src/logging/log-output';

/** A fixed instant, formatted in the local time zone the way the text line shows it. */
const TIME = new Date(2026, 11, 1, 9, 5, 7, 42).getTime();
const record = (fields: Record<string, unknown>) => ({
  level: 30,
  time: TIME,
  pid: 123,
  hostname: 'vm',
  ...fields,
});

describe('the text log format', () => {
  it('one line: local time, level, context, message; no pid or host', () => {
    expect(formatLogLine(record({ context: 'database', msg: 'ready' }), false)).toBe(
      '2026-12-01 09:05:07.042 INFO  database: ready',
    );
  });

  it('a completed request: method, URL, status, duration and request id', () => {
    const line = formatLogLine(
      record({
        service: 'statehouse',
        req: { id: 'r-1', method: 'GET', url: '/v1/units?limit=5' },
        res: { statusCode: 200 },
        responseTime: 12,
        msg: 'request completed',
      }),
      false,
    );
    expect(line).toBe(
      '2026-12-01 09:05:07.042 INFO  http: GET /v1/units?limit=5 → 200 in 12 ms request=r-1',
    );
  });

  it('an error: its type, message and where it was thrown, still on one line', () => {
    const line = formatLogLine(
      record({
        level: 50,
        context: 'http',
        msg: 'unexpected failure',
        err: {
          type: 'TypeError',
          message: 'x is undefined',
          stack:
            'TypeError: x is undefined\n    at handler (/app/dist/src/a.js:3:9)\n    at next (b.js:1:1)',
        },
      }),
      false,
    );
    expect(line).toBe(
      '2026-12-01 09:05:07.042 ERROR http: unexpected failure — TypeError: x is undefined (at handler (/app/dist/src/a.js:3:9))',
    );
  });

  it('other fields as key=value (JSON when not a plain word)', () => {
    const line = formatLogLine(
      record({
        level: 40,
        context: 'audit',
        msg: 'event',
        actor: 'svc:ci',
        audit: { n: 1 },
        why: 'a b',
      }),
      false,
    );
    expect(line).toBe(
      '2026-12-01 09:05:07.042 WARN  audit: event actor=svc:ci audit={"n":1} why="a b"',
    );
  });

  it('control characters from a request cannot reach the terminal: escaped, and the line stays one line', () => {
    const line = formatLogLine(
      record({
        msg: 'bad \x1b[2J name\nnext',
        req: { id: '1', method: 'GET', url: '/x\x1b]0;t\x07' },
      }),
      false,
    );
    expect(line).not.toMatch(/[\x00-\x1f]/); // eslint-disable-line no-control-regex
    expect(line).toContain('bad \\u001b[2J name\\nnext');
  });

  it('colours only when asked: the level and context painted, the content escaped before', () => {
    const plain = formatLogLine(record({ context: 'c', msg: 'm' }), false);
    const painted = formatLogLine(record({ context: 'c', msg: 'm\x1b' }), true);
    expect(plain).not.toContain('\x1b');
    expect(painted).toContain('\x1b[32mINFO \x1b[0m');
    expect(painted).toContain('\x1b[36mc:\x1b[0m');
    expect(painted).toContain('m\\u001b');
  });
});

describe('where the log goes', () => {
  const stream = (isTTY: boolean) => {
    const written: string[] = [];
    return {
      written,
      out: { isTTY, fd: 1, write: (s: string) => written.push(s) } as unknown as NodeJS.WriteStream,
    };
  };
  const line = `${JSON.stringify(record({ context: 'c', msg: 'hello' }))}\n`;

  it('auto on a terminal: text, in colour (unless NO_COLOR)', () => {
    const tty = stream(true);
    logDestination({ logFormat: 'auto', logColor: true }, tty.out).write(line);
    expect(tty.written).toEqual([`${formatLogLine(JSON.parse(line), true)}\n`]);
    const noColour = stream(true);
    logDestination({ logFormat: 'auto', logColor: false }, noColour.out).write(line);
    expect(noColour.written).toEqual([`${formatLogLine(JSON.parse(line), false)}\n`]);
  });

  it('text when not a terminal: no colours', () => {
    const pipe = stream(false);
    logDestination({ logFormat: 'text', logColor: true }, pipe.out).write(line);
    expect(pipe.written).toEqual([`${formatLogLine(JSON.parse(line), false)}\n`]);
  });

  it('auto when not a terminal, and json anywhere: the JSON lines themselves, not the text writer', () => {
    const pipe = stream(false);
    const tty = stream(true);
    expect(logDestination({ logFormat: 'auto', logColor: true }, pipe.out)).not.toHaveProperty(
      'colour',
    );
    expect(logDestination({ logFormat: 'json', logColor: true }, tty.out)).toBe(
      logDestination({ logFormat: 'auto', logColor: true }, pipe.out),
    );
  });
});
