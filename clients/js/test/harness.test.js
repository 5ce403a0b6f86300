// The tests' own harness (daemon.js): on a Node without a WebSocket of its own and without the
// `ws` package, it says what to install, as the library's `no_websocket` error does, instead of
// a raw "Cannot find module".

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

// Preloaded into a child node: `ws` resolves nowhere (npm's nor Debian's path), and no built-in WebSocket.
const HIDE_WS = `
const Module = require('node:module');
const resolve = Module._resolveFilename;
Module._resolveFilename = function (request, ...rest) {
  if (request === 'ws' || request.startsWith('ws/') || request.startsWith('/usr/share/nodejs/ws')) {
    const err = new Error("Cannot find module '" + request + "'");
    err.code = 'MODULE_NOT_FOUND';
    throw err;
  }
  return resolve.call(this, request, ...rest);
};
delete globalThis.WebSocket;
`;

test('without ws, daemon.js says what to install', () => {
  const dir = mkdtempSync(join(tmpdir(), 'vigil-js-nows-'));
  try {
    const hide = join(dir, 'hide-ws.cjs');
    writeFileSync(hide, HIDE_WS);
    const daemon = new URL('./daemon.js', import.meta.url).href;
    const p = spawnSync(process.execPath, ['--require', hide, '--input-type=module', '-e', `await import(${JSON.stringify(daemon)});`],
      { encoding: 'utf8', timeout: 30000 });
    assert.notEqual(p.status, 0, 'daemon.js loaded without a WebSocket implementation');
    assert.match(p.stderr, /apt-get install node-ws/, p.stderr);
    assert.match(p.stderr, /npm install ws/, p.stderr);
    assert.doesNotMatch(p.stderr, /Cannot find module/, p.stderr);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
