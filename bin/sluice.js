#!/usr/bin/env node
// The `sluice` command: the compiled CLI (built by `npm ci` through the `prepare` script).
import '../dist/src/cli.js';
