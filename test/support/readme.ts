import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT } from './paths';

/** The marker line before a README block: how the README suite treats it. */
export const EXAMPLE_MARKER = /^<!-- example: (runnable|needs-idp|fragment|not-run: .+?) -->$/;

export interface ReadmeBlock {
  /** The fence's info string (`sh`, `hcl`, …). */
  lang: string;
  code: string;
  /** The line of the opening fence (1-based). */
  line: number;
  marker: string | undefined;
  /** The heading the block is under. */
  section: string;
}

/** The fenced blocks of a Markdown text, with the marker before each and its heading. */
export function readmeBlocks(markdown: string): ReadmeBlock[] {
  const lines = markdown.split('\n');
  const blocks: ReadmeBlock[] = [];
  let section = '(top)';
  for (let i = 0; i < lines.length; i++) {
    const heading = /^#{1,6} (.+)$/.exec(lines[i]);
    if (heading) section = heading[1];
    const fence = /^```(\S*)\s*$/.exec(lines[i]);
    if (!fence) continue;
    const start = i;
    const body: string[] = [];
    for (i++; i < lines.length && lines[i] !== '```'; i++) body.push(lines[i]);
    let before = start - 1;
    while (before >= 0 && lines[before].trim() === '') before--;
    const marker = before >= 0 ? EXAMPLE_MARKER.exec(lines[before].trim())?.[1] : undefined;
    blocks.push({
      lang: fence[1],
      code: `${body.join('\n')}\n`,
      line: start + 1,
      marker,
      section,
    });
  }
  return blocks;
}

/** README.md of the repository, as the reader sees it. */
export function readme(): string {
  return readFileSync(join(ROOT, 'README.md'), 'utf8');
}
