// The request/reply layer against a real vigild: ref correlation, typed errors, timeouts,
// waiting on rate_limited, and what happens to requests when the connection goes.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { VigilClient, VigilError } from '../src/index.js';
import { Daemon, Tapped, waitFor } from './daemon.js';

let d;
before(async () => {
  // A write budget of 2 with one token a second: the third quick write is refused for about 1 s.
  d = await new Daemon({ pins: { writes_per_minute: 60, write_burst: 2 } }).start();
});
after(async () => { await d.dispose(); });

const connect = async (opts = {}) => {
  const c = new VigilClient(d.url, { WebSocket: Tapped, reconnect: false, ...opts });
  await c.connect();
  return c;
};

test('welcome gives the session and the limits (over the WebSocket the library finds by itself)', async () => {
  const c = await connect({ WebSocket: undefined });
  assert.equal(typeof c.session, 'string');
  assert.ok(c.session.length >= 16);
  assert.equal(c.limits.write_burst, 2);
  assert.ok(c.limits.categories.includes('general'));
  c.close();
});

test('concurrent requests each get their own reply by ref', async () => {
  const c = await connect();
  const areas = [[1, 1, 2, 2], [10, 10, 11, 11], [-5, -5, -4, -4], [40, 40, 41, 41]];
  // Different ops in flight at once: the replies must come back to the right promise.
  const results = await Promise.allSettled([
    c.request('subscribe', { area: { bbox: areas[0] } }),
    c.request('pin.vote', { id: 'no-such-pin', value: 1 }),
    c.request('unsubscribe'),
    c.request('pin.create', { pin: { lat: 100, lon: 0, title: 'x' } }),
    c.request('subscribe', { area: { bbox: areas[1] } }),
  ]);
  assert.equal(results[0].status, 'fulfilled');
  assert.deepEqual(results[0].value.pins, []);
  assert.equal(results[1].status, 'rejected');
  assert.equal(results[1].reason.code, 'not_found');
  assert.equal(results[2].status, 'fulfilled');
  assert.equal(results[3].status, 'rejected');
  assert.equal(results[3].reason.code, 'invalid_lat');
  assert.equal(results[4].status, 'fulfilled');
  c.close();
});

test('an error reply is a VigilError with code, field and message', async () => {
  const c = await connect();
  const err = await c.request('pin.create', { pin: { lat: 52.5, lon: 200, title: 'x' } }).catch((e) => e);
  assert.ok(err instanceof VigilError);
  assert.equal(err.code, 'invalid_lon');
  assert.equal(err.field, 'pin.lon');
  assert.equal(err.op, 'pin.create');
  assert.match(err.message, /lon/);
  const unknown = await c.request('no.such.op').catch((e) => e);
  assert.equal(unknown.code, 'unknown_op');
  c.close();
});

test('a request the server does not answer in time fails with timeout, and the next one works', async () => {
  const c = await connect();
  d.pause();  // the daemon stops answering (SIGSTOP)
  let err;
  try {
    const started = Date.now();
    err = await c.request('unsubscribe', {}, { timeoutMs: 300 }).catch((e) => e);
    const took = Date.now() - started;
    assert.ok(took >= 290 && took < 3000, `timed out after ${took} ms`);
  } finally {
    d.resume();
  }
  assert.ok(err instanceof VigilError);
  assert.equal(err.code, 'timeout');
  // The late reply to the timed-out request must not be taken for the next one's.
  const reply = await c.request('subscribe', { area: { bbox: [0, 0, 1, 1] } });
  assert.deepEqual(reply.pins, []);
  c.close();
});

test('rate_limited is honoured: the client waits retry_after_ms and the write then succeeds', async () => {
  const c = await connect();
  const waits = [];
  c.on('rate_limited', (e) => waits.push(e));
  const pin = { lat: 48.1, lon: 11.5, title: 'rate', ttl_s: 60 };
  await c.request('pin.create', { pin });
  await c.request('pin.create', { pin });
  const started = Date.now();
  const third = await c.request('pin.create', { pin });
  const took = Date.now() - started;
  assert.equal(typeof third.pin.id, 'string');
  assert.equal(waits.length, 1, 'one refusal, then success');
  assert.equal(waits[0].op, 'pin.create');
  assert.ok(waits[0].retryAfterMs > 0 && waits[0].retryAfterMs <= 1000, `retry after ${waits[0].retryAfterMs}`);
  assert.ok(took >= waits[0].retryAfterMs, `succeeded after ${took} ms, told to wait ${waits[0].retryAfterMs}`);
  // Without retrying, the refusal reaches the caller with retryAfterMs.
  const err = await c.request('pin.create', { pin }, { retryRateLimited: false }).catch((e) => e);
  assert.equal(err.code, 'rate_limited');
  assert.ok(err.retryAfterMs > 0);
  c.close();
});

test('requests in flight when the connection goes fail with disconnected; with reconnect off the client closes', async () => {
  const own = await new Daemon().start();
  try {
    const c = new VigilClient(own.url, { WebSocket: Tapped, reconnect: false });
    await c.connect();
    own.pause();  // stopped: the request is never answered, and then the daemon is killed
    const pending = c.request('unsubscribe', {}, { timeoutMs: 10000 }).catch((e) => e);
    const closed = waitFor(c, 'closed');
    await own.stop('SIGKILL');
    const err = await pending;
    assert.equal(err.code, 'disconnected');
    await closed;
    const after = await c.request('unsubscribe').catch((e) => e);
    assert.equal(after.code, 'closed');
  } finally {
    await own.dispose();
  }
});

test('a request made before the connection is open waits for it', async () => {
  const c = new VigilClient(d.url, { WebSocket: Tapped, reconnect: false });
  const connecting = c.connect();
  // Not awaited: sent once the welcome has arrived.
  const reply = await c.request('subscribe', { area: { bbox: [0, 0, 1, 1] } });
  await connecting;
  assert.deepEqual(reply.pins, []);
  c.close();
});
