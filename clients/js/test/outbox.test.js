// Writes that are safe to retry, against a real vigild (with a state directory): every write
// carries an idempotency key, and the outbox sends writes made offline, or cut off by a lost
// connection, again on reconnect with the same key, in order, each applied once.

import { test, before, after, afterEach } from 'node:test';
import assert from 'node:assert/strict';
import { VigilClient, WRITE_OPS, newIdemKey } from '../src/index.js';
import { Daemon, Tapped, track, closeClients, waitFor } from './daemon.js';

let d;
before(async () => { d = await new Daemon({}, { stateful: true }).start(); });
after(async () => { await d.dispose(); });
afterEach(closeClients);

const fast = { minDelayMs: 50, maxDelayMs: 200, factor: 2, jitter: 0.5 };

async function client(options = {}) {
  const c = track(new VigilClient(d.url, { WebSocket: Tapped, reconnect: fast, requestTimeoutMs: 10000, ...options }));
  await c.connect();
  return c;
}

/** The admin listener's port, from the newest log of the daemon. */
function adminPort() {
  for (const line of d.log[d.log.length - 1]) {
    const m = /admin endpoints on 127\.0\.0\.1:(\d+)/.exec(line);
    if (m) return Number(m[1]);
  }
  throw new Error('no admin listener in the log');
}

async function metric(name) {
  const text = await (await fetch(`http://127.0.0.1:${adminPort()}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${name} `));
  return line ? Number(line.split(' ')[1]) : 0;
}

async function pinsTitled(c, prefix) {
  const reply = await c.request('subscribe', { area: { bbox: [-90, -180, 90, 180] } });
  return reply.pins.filter((p) => p.title.startsWith(prefix));
}

test('keys are 22 base64url characters of fresh randomness, and every write carries one', async () => {
  const keys = new Set(Array.from({ length: 100 }, newIdemKey));
  assert.equal(keys.size, 100);
  for (const k of keys) assert.match(k, /^[A-Za-z0-9_-]{22}$/);
  assert.ok(WRITE_OPS.has('pin.create') && WRITE_OPS.has('panic.start') && WRITE_OPS.has('checkin.ack'));
  assert.ok(!WRITE_OPS.has('subscribe') && !WRITE_OPS.has('panic.watch') && !WRITE_OPS.has('checkin.join'));
  const c = await client();
  const sent = [];
  // What goes on the wire: a write has an idem, a read has none.
  const original = Tapped.prototype.send;
  Tapped.prototype.send = function send(text) { sent.push(JSON.parse(text)); return original.call(this, text); };
  try {
    await c.request('pin.create', { pin: { lat: 1, lon: 1, title: 'keyed' } });
    await c.request('unsubscribe');
  } finally {
    delete Tapped.prototype.send;
  }
  assert.match(sent[0].idem, /^[A-Za-z0-9_-]{22}$/);
  assert.equal(sent[1].idem, undefined);
});

test('a write whose connection drops before its answer is applied once and answered', async () => {
  const c = await client();
  const repeatsBefore = await metric('vigil_idempotency_repeats_total');
  // The daemon is stopped (SIGSTOP) while the write is on its way, then the connection is
  // dropped: the write sits in the old connection's socket, unanswered.
  d.pause();
  const write = c.request('pin.create', { pin: { lat: 3, lon: 3, title: 'cut-once' } });
  await new Promise((resolve) => setImmediate(resolve));
  assert.equal(c.outboxSize, 1);
  const back = waitFor(c, 'reconnected');
  c.reconnectNow();
  d.resume();
  // The old connection's copy and the resend both reach the server; one applies, the other is
  // answered from the kept answer. The promise resolves with the pin.
  const reply = await write;
  await back;
  assert.equal(c.outboxSize, 0);
  const pins = await pinsTitled(c, 'cut-once');
  assert.deepEqual(pins.map((p) => p.id), [reply.pin.id], 'one pin, the one answered');
  // The old connection's copy may still be queued behind its close: wait for the server to count it.
  for (let i = 0; i < 100 && (await metric('vigil_idempotency_repeats_total')) === repeatsBefore; i++) {
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  assert.equal(await metric('vigil_idempotency_repeats_total'), repeatsBefore + 1, 'the second copy was a repeat');
  assert.equal((await pinsTitled(c, 'cut-once')).length, 1);
});

test('writes made offline wait in the outbox and are sent in order on reconnect', async () => {
  const c = await client();
  const gone = waitFor(c, 'disconnected');
  await d.stop();
  await gone;
  const writes = [1, 2, 3].map((n) => c.request('pin.create', { pin: { lat: 4, lon: 4, title: `offline-${n}` } }));
  assert.equal(c.outboxSize, 3);
  await d.start();
  const replies = await Promise.all(writes);
  for (const r of replies) assert.equal(r.repeat, undefined, 'sent once the server was back: applied, not repeated');
  const pins = await pinsTitled(c, 'offline-');
  // Newest first in a subscribe reply: created in the order they were made.
  assert.deepEqual(pins.map((p) => p.title), ['offline-3', 'offline-2', 'offline-1']);
  assert.deepEqual(pins.map((p) => p.id), replies.map((r) => r.pin.id).reverse());
});

test('a restart in the middle: a write applied before it is answered again after it, not applied twice', async () => {
  const c = await client();
  const idem = newIdemKey();
  const first = await c.request('pin.create', { idem, pin: { lat: 5, lon: 5, title: 'restart-once' } });
  // The answer was lost (as if): the app sends the same write again while the server restarts,
  // killed without a chance to write a snapshot (the journal holds the kept answer).
  const gone = waitFor(c, 'disconnected');
  await d.stop('SIGKILL');
  await gone;
  const again = c.request('pin.create', { idem, pin: { lat: 5, lon: 5, title: 'restart-once' } });
  assert.equal(c.outboxSize, 1);
  await d.start();
  const reply = await again;
  assert.equal(reply.repeat, true);
  assert.equal(reply.pin.id, first.pin.id);
  assert.equal(reply.edit_token, first.edit_token);
  assert.equal((await pinsTitled(c, 'restart-once')).length, 1);
  // The same key with another request is refused, naming the field.
  const err = await c.request('pin.create', { idem, pin: { lat: 5, lon: 5, title: 'other' } }).catch((e) => e);
  assert.equal(err.code, 'idem_conflict');
  assert.equal(err.field, 'idem');
  assert.equal(err.idem, idem);
});

test('a panic.start made while the server restarts is sent on reconnect, and its owner works', async () => {
  const c = await client();
  const gone = waitFor(c, 'disconnected');
  await d.stop();
  await gone;
  const started = c.startPanic({ status: 'red', lat: 52.5, lon: 13.4, watchers: 1 });
  await d.start();
  const owner = await started;
  assert.equal(typeof owner.ownerToken, 'string');
  await owner.update({ lat: 52.6, lon: 13.5 });
  await owner.end('safe');
});

test('the outbox ends every write: its bound, its timeout, close()', async () => {
  const c = await client({ maxOutbox: 2 });
  const gone = waitFor(c, 'disconnected');
  await d.stop();
  await gone;
  try {
    const a = c.request('pin.create', { pin: { lat: 6, lon: 6, title: 'bound-a' } }).catch((e) => e);
    const b = c.request('pin.create', { pin: { lat: 6, lon: 6, title: 'bound-b' } }, { timeoutMs: 200 }).catch((e) => e);
    const full = await c.request('pin.create', { pin: { lat: 6, lon: 6, title: 'bound-c' } }).catch((e) => e);
    assert.equal(full.code, 'outbox_full');
    assert.match(full.idem, /^[A-Za-z0-9_-]{22}$/);
    const timedOut = await b;
    assert.equal(timedOut.code, 'timeout');
    assert.equal(c.outboxSize, 1, 'the timed-out write left the outbox');
    // A read offline still waits for the connection within its own timeout, as before.
    c.close();
    const closed = await a;
    assert.equal(closed.code, 'closed');
    assert.equal(c.outboxSize, 0);
  } finally {
    await d.start();
  }
});
