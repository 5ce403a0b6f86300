// Starts a real vigild for the tests (loopback, a port of the kernel's choosing, a temp config),
// restarts it on the same port, and stops it. VIGILD names the binary (default: the repo's
// release build). With VIGIL_E2E_LOG_DIR set, each daemon's log is left there for the
// privacy scan (Tests/e2e/test_log_privacy.py), as the Python suite does.

import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import { mkdtempSync, writeFileSync, mkdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';

const REPO = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
export const VIGILD = process.env.VIGILD || join(REPO, '.build', 'release', 'vigild');

// What the server told the clients in confidence, for the log-privacy scan: every message a
// client received passes through `Tapped`, and the tokens, ids and coordinates in it are kept and
// written at exit next to the daemons' logs (secrets-js-PID.json; privacy.py reads them all).
const SECRET_KEYS = new Set(['owner_token', 'edit_token', 'watch_token', 'member_token', 'session', 'stream', 'circle']);
const secrets = new Set();
const coords = new Set();

function remember(text) {
  for (const m of text.matchAll(/"(lat|lon)"\s*:\s*(-?\d+\.\d{4,})/g)) coords.add(m[2]);
  const walk = (v) => {
    if (Array.isArray(v)) v.forEach(walk);
    else if (v && typeof v === 'object') {
      for (const [k, x] of Object.entries(v)) {
        if (SECRET_KEYS.has(k) && typeof x === 'string' && x.length >= 8) secrets.add(x);
        else if (k === 'watch_tokens' && Array.isArray(x)) x.forEach((t) => secrets.add(t));
        else walk(x);
      }
    }
  };
  try { walk(JSON.parse(text)); } catch { /* not JSON */ }
}

if (process.env.VIGIL_E2E_LOG_DIR) {
  process.on('exit', () => {
    const dir = process.env.VIGIL_E2E_LOG_DIR;
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, `secrets-js-${process.pid}.json`), JSON.stringify({ secrets: [...secrets], coords: [...coords] }));
  });
}

const require = createRequire(import.meta.url);

/** Node's own WebSocket (Node 22+), else the `ws` package from npm or Debian, else what to install. */
function baseWebSocket() {
  if (typeof globalThis.WebSocket === 'function') return globalThis.WebSocket;
  for (const name of ['ws', '/usr/share/nodejs/ws']) {
    try {
      return require(name);
    } catch (err) {
      if (err.code !== 'MODULE_NOT_FOUND') throw err;
    }
  }
  throw new Error(`the tests need a WebSocket implementation, and Node ${process.versions.node} has no globalThis.WebSocket: `
    + 'install the ws package (apt-get install node-ws on Debian, or npm install ws in clients/js), or use Node 22+');
}
const Base = baseWebSocket();

/** The WebSocket the tests' clients use: the real one, remembering what it receives. */
export class Tapped extends Base {
  set onmessage(fn) {
    super.onmessage = (ev) => { remember(typeof ev.data === 'string' ? ev.data : String(ev.data)); fn(ev); };
  }

  get onmessage() { return super.onmessage; }
}

/** YAML for a nested object of scalars (what the tests' configs need). */
function yaml(obj, indent = '') {
  return Object.entries(obj).map(([k, v]) => (v !== null && typeof v === 'object' && !Array.isArray(v)
    ? `${indent}${k}:\n${yaml(v, indent + '  ')}`
    : `${indent}${k}: ${JSON.stringify(v)}`)).join('\n');
}

// Daemons still running when the test process exits (a test that threw before its cleanup) go with it.
const running = new Set();
process.on('exit', () => { for (const proc of running) proc.kill('SIGKILL'); });

export class Daemon {
  constructor(config = {}, { stateful = false } = {}) {
    this.dir = mkdtempSync(join(tmpdir(), 'vigil-js-'));
    const cfg = { admin: { listen: '127.0.0.1:0' }, log: { level: process.env.VIGIL_E2E_LOG_LEVEL || 'info' }, ...config };
    if (stateful) cfg.state = { directory: join(this.dir, 'state'), fsync: 'off', ...(config.state || {}) };
    this.configPath = join(this.dir, 'vigild.yaml');
    writeFileSync(this.configPath, yaml(cfg) + '\n');
    this.port = 0;
    this.proc = null;
    this.log = [];
  }

  get url() { return `ws://127.0.0.1:${this.port}/v1`; }

  /** Starts (on the previous port after the first start); resolves once it listens. */
  start(timeoutMs = 15000) {
    const args = ['--config', this.configPath, '--listen', `127.0.0.1:${this.port}`];
    const proc = spawn(VIGILD, args, { stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, VIGIL_ADMIN_LISTEN: '127.0.0.1:0', NOTIFY_SOCKET: '' } });
    this.proc = proc;
    running.add(proc);
    const lines = [];
    this.log.push(lines);
    return new Promise((resolve, reject) => {
      let buffered = '';
      const timer = setTimeout(() => reject(new Error(`vigild did not listen within ${timeoutMs} ms:\n${lines.join('\n')}`)), timeoutMs);
      proc.stderr.setEncoding('utf8');
      proc.stderr.on('data', (chunk) => {
        buffered += chunk;
        let nl;
        while ((nl = buffered.indexOf('\n')) >= 0) {
          const line = buffered.slice(0, nl);
          buffered = buffered.slice(nl + 1);
          lines.push(line);
          const m = /listening on (\S+):(\d+)/.exec(line);
          if (m && !line.includes('for TLS')) {
            this.port = Number(m[2]);
            clearTimeout(timer);
            resolve(this);
          }
        }
      });
      proc.on('exit', (code) => {
        running.delete(proc);
        clearTimeout(timer);
        this.#keepLog(lines, proc.pid);
        reject(new Error(`vigild exited with ${code} before listening:\n${lines.join('\n')}`));
      });
    });
  }

  /** SIGTERM and wait for the exit; resolves with the exit code. */
  stop(signal = 'SIGTERM') {
    const proc = this.proc;
    if (!proc || proc.exitCode !== null || proc.signalCode !== null) return Promise.resolve(proc?.exitCode ?? null);
    return new Promise((resolve) => {
      const kill = setTimeout(() => proc.kill('SIGKILL'), 10000);
      proc.once('exit', (code) => { clearTimeout(kill); resolve(code); });
      proc.kill(signal);
    });
  }

  /** Stops, then starts again on the same port with the same state directory. */
  async restart() {
    const code = await this.stop();
    if (code !== 0) throw new Error(`vigild exited with ${code} on SIGTERM`);
    return this.start();
  }

  pause() { this.proc.kill('SIGSTOP'); }
  resume() { this.proc.kill('SIGCONT'); }

  async dispose() {
    if (this.proc) this.proc.kill('SIGCONT');
    await this.stop();
    rmSync(this.dir, { recursive: true, force: true });
  }

  #keepLog(lines, pid) {
    const dir = process.env.VIGIL_E2E_LOG_DIR;
    if (!dir) return;
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, `vigild-js-${pid}-${process.hrtime.bigint()}.log`), lines.join('\n') + '\n');
  }
}

// Every client a test makes is closed after it (afterEach(closeClients)), passed or failed: a
// client left reconnecting would keep the test file's process alive for ever.
const live = new Set();
export function track(client) {
  live.add(client);
  return client;
}
export function closeClients() {
  for (const c of live) c.close();
  live.clear();
}

/** Resolves with the first `name` event of `emitter` for which `pred` holds; rejects after `ms`. */
export function waitFor(emitter, name, pred = () => true, ms = 10000) {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => { off(); reject(new Error(`no ${name} within ${ms} ms`)); }, ms);
    const off = emitter.on(name, (payload) => {
      if (!pred(payload)) return;
      clearTimeout(timer);
      off();
      resolve(payload);
    });
  });
}

/** Resolves once `check()` is true, re-checking on each `name` event of `emitter`. */
export function until(emitter, name, check, ms = 10000) {
  if (check()) return Promise.resolve();
  return waitFor(emitter, name, () => check(), ms).then(() => undefined);
}
