#!/usr/bin/env node
'use strict';
// `npm start -- <command>`: compiles when needed, then runs `statehouse <command>` (`serve` when
// no arguments are given) in this very process. The npm script `exec`s node, so there is no
// `sh -c` in between either: a signal npm passes on reaches the server itself, and nothing is
// left behind when it stops.
const { buildIfStale, entry } = require('./build-if-stale');

buildIfStale();
const args = process.argv.slice(2);
void require(entry).main(args.length === 0 ? ['serve'] : args);
