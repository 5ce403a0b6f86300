// The package as npm would publish it: `npm pack` accepts it, it ships the sources, types and
// README, and the declarations name every export of the module.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as lib from '../src/index.js';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');

test('npm pack accepts the package and ships sources, types and README', { skip: !has('npm') && 'npm is not installed' }, () => {
  const out = execFileSync('npm', ['pack', '--dry-run', '--json'], { cwd: ROOT, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  const [info] = JSON.parse(out);
  const files = info.files.map((f) => f.path).sort();
  for (const f of ['README.md', 'package.json', 'src/index.js', 'src/client.js', 'src/models.js', 'src/owner.js', 'src/circle.js', 'src/emitter.js', 'vigil.d.ts']) {
    assert.ok(files.includes(f), `${f} missing from ${files}`);
  }
  assert.ok(!files.some((f) => f.startsWith('test/')), 'tests are not shipped');
  const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8'));
  assert.deepEqual(pkg.dependencies ?? {}, {}, 'no dependencies');
});

test('vigil.d.ts declares every export', () => {
  const dts = readFileSync(join(ROOT, 'vigil.d.ts'), 'utf8');
  for (const name of Object.keys(lib)) {
    assert.match(dts, new RegExp(`export (declare )?(class|function|const) ${name}\\b`), `${name} is not declared`);
  }
});

test('vigil.d.ts types the library as the README uses it (tsc --strict)', { skip: !has('tsc') && 'tsc is not installed (apt-get install node-typescript)' }, () => {
  execFileSync('tsc', ['--noEmit', '--strict', '--target', 'es2022', '--module', 'es2022', '--moduleResolution', 'node', join(ROOT, 'test', 'types.ts')],
    { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
});

function has(command) {
  try {
    execFileSync(command, ['--version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}
