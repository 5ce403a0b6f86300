// Reconnection under a restart of a real vigild (with a state directory, so pins and streams
// survive it): a watcher sees every event exactly once and in order, or an explicit gap; a map
// subscriber's pin set is reconciled from the new subscribe reply; an owner is resumed.

import { test, before, after, afterEach } from 'node:test';
import assert from 'node:assert/strict';
import { VigilClient, MapModel, WatchModel } from '../src/index.js';
import { Emitter } from '../src/emitter.js';
import { Daemon, Tapped, track, closeClients, waitFor, until } from './daemon.js';

let d;
before(async () => { d = await new Daemon({ panic: { history_events: 50 } }, { stateful: true }).start(); });
after(async () => { await d.dispose(); });
afterEach(closeClients);

// Fast reconnects for the owner and the subscriber; the watcher comes back later on purpose, so
// that events sent while it is away must reach it by replay.
const fast = { minDelayMs: 50, maxDelayMs: 200, factor: 2, jitter: 0.5 };
const slow = { minDelayMs: 2500, maxDelayMs: 2500, factor: 1, jitter: 0.1 };

async function client(reconnect = fast) {
  const c = track(new VigilClient(d.url, { WebSocket: Tapped, reconnect, requestTimeoutMs: 5000 }));
  await c.connect();
  return c;
}

test('a watcher gets every event exactly once and in order across a server restart', async () => {
  const phone = await client();
  const contact = await client(slow);
  const owner = await phone.startPanic({ status: 'red', lat: 52.5, lon: 13.4, accuracy_m: 5, watchers: 1 });
  const watch = await contact.watch(owner.stream, owner.watchTokens[0]);
  const model = new WatchModel(watch);
  const seen = [];
  watch.on('event', (m) => { if (typeof m.seq === 'number') seen.push(m.seq); });
  assert.equal(watch.lastSeq, 1);

  for (let i = 0; i < 5; i++) await owner.update({ lat: 52.5 + i / 1000, lon: 13.4, accuracy_m: 5 });
  await until(watch, 'event', () => watch.lastSeq === 6);

  const reconnected = waitFor(phone, 'reconnected');
  const resumed = waitFor(owner, 'resumed');
  await d.restart();
  await reconnected;
  await resumed;
  assert.equal(owner.status, 'red', 'as the server had it');
  // The watcher is still away (slow backoff): these reach it only by replay with since=6.
  for (let i = 5; i < 10; i++) await owner.update({ lat: 52.5 + i / 1000, lon: 13.4, accuracy_m: 5 });
  assert.equal(contact.connections, 1, 'the watcher must not be back yet');
  await owner.setStatus('amber');
  await until(watch, 'event', () => watch.lastSeq === 12, 10000);
  assert.equal(contact.connections, 2);
  // ... and these live, after the replay.
  for (let i = 10; i < 13; i++) await owner.update({ lat: 52.5 + i / 1000, lon: 13.4, accuracy_m: 5 });
  await owner.end('safe');
  await until(watch, 'event', () => watch.lastSeq === 16);

  assert.deepEqual(seen, Array.from({ length: 15 }, (_, i) => i + 2), 'seqs 2..16 once each, in order');
  assert.equal(model.trail.length, 14, 'the start and 13 updates');
  assert.deepEqual(model.trail.map((p) => p.seq), [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 14, 15]);
  assert.equal(model.status, 'amber');
  assert.deepEqual(model.ended?.reason, 'safe');
  assert.equal(model.gaps, 0);
  // Ended: nothing more to watch after the next reconnect.
  let rewatched = 0;
  watch.on('state', () => rewatched++);
  const again = waitFor(contact, 'reconnected');
  contact.reconnectNow();
  await again;
  await contact.request('unsubscribe');  // a barrier: the reply to a re-watch sent at the welcome would come first
  assert.equal(rewatched, 0);
  phone.close();
  contact.close();
});

test('a watcher that missed more than the server holds is told so with gap and the current state', async () => {
  const own = await new Daemon({ panic: { history_events: 3 } }, { stateful: true }).start();
  try {
    const phone = track(new VigilClient(own.url, { WebSocket: Tapped, reconnect: fast }));
    const contact = track(new VigilClient(own.url, { WebSocket: Tapped, reconnect: slow }));
    await phone.connect();
    await contact.connect();
    const owner = await phone.startPanic({ status: 'red', lat: 1, lon: 2 });
    const watch = await contact.watch(owner.stream, owner.watchTokens[0]);
    const model = new WatchModel(watch);
    const reconnected = waitFor(phone, 'reconnected');
    await own.restart();
    await reconnected;
    for (let i = 0; i < 6; i++) await owner.update({ lat: 1 + i / 100, lon: 2 });
    const gap = await waitFor(watch, 'gap', () => true, 10000);
    assert.equal(gap.lastSeq, 1);
    assert.equal(gap.state.seq, 7);
    assert.equal(watch.lastSeq, 7);
    assert.equal(model.gaps, 1);
    assert.equal(model.lastSeq, 7);
    assert.equal(model.last.lat, 1.05);
    // Live events carry on from the state.
    await owner.update({ lat: 1.5, lon: 2 });
    await until(watch, 'event', () => watch.lastSeq === 8);
    assert.equal(model.last.lat, 1.5);
    phone.close();
    contact.close();
  } finally {
    await own.dispose();
  }
});

test('a subscriber re-subscribes after a restart and its pin set is reconciled', async () => {
  const area = { bbox: [40, 10, 41, 11] };
  const other = await client();
  const viewer = await client(slow);
  const map = new MapModel(viewer);
  const removed = [];
  const added = [];
  map.on('removed', (e) => removed.push(e));
  map.on('added', (p) => added.push(p.id));
  const a = await other.request('pin.create', { pin: { lat: 40.5, lon: 10.5, title: 'A' } });
  const b = await other.request('pin.create', { pin: { lat: 40.6, lon: 10.6, title: 'B' } });
  await viewer.subscribe(area);
  assert.deepEqual([...map.pins.keys()].sort(), [a.pin.id, b.pin.id].sort());

  const back = waitFor(other, 'reconnected');
  await d.restart();
  await back;
  // While the viewer is away: A is deleted, C created, B voted on.
  await other.request('pin.delete', { id: a.pin.id, edit_token: a.edit_token });
  const c = await other.request('pin.create', { pin: { lat: 40.7, lon: 10.7, title: 'C' } });
  await other.request('pin.vote', { id: b.pin.id, value: 1 });
  assert.equal(viewer.connections, 1, 'the viewer must not be back yet');

  const resubscribed = await waitFor(viewer, 'pins', (e) => e.resubscribed, 10000);
  assert.equal(resubscribed.pins.length, 2);
  assert.deepEqual([...map.pins.keys()].sort(), [b.pin.id, c.pin.id].sort());
  assert.deepEqual(removed.map((e) => [e.pin.id, e.reason]), [[a.pin.id, 'reconciled']]);
  assert.ok(added.includes(c.pin.id));
  assert.equal(map.pins.get(b.pin.id).up, 1);
  // Live again: a new pin arrives as an event.
  const d2 = await other.request('pin.create', { pin: { lat: 40.8, lon: 10.8, title: 'D' } });
  await until(map, 'change', () => map.pins.has(d2.pin.id));
  other.close();
  viewer.close();
});

test('reconnectNow drops the connection and restores the subscription at once', async () => {
  const c = await client(slow);
  await c.subscribe({ bbox: [1, 1, 2, 2] });
  const session = c.session;
  const pending = c.request('subscribe', { area: { bbox: [1, 1, 2, 2] } }).catch((e) => e);
  const back = waitFor(c, 'pins', (e) => e.resubscribed, 1500);  // well before the slow backoff's 2.25 s
  c.reconnectNow();
  assert.equal((await pending).code, 'disconnected');
  await back;
  assert.notEqual(c.session, session);
  assert.equal(c.connections, 2);
  c.close();
});

test('an attempt that is not welcomed in time is given up and retried', async () => {
  const own = await new Daemon().start();
  try {
    own.pause();  // the kernel accepts the connection, nobody answers it
    const c = track(new VigilClient(own.url, { WebSocket: Tapped, attemptTimeoutMs: 200, reconnect: { minDelayMs: 50, maxDelayMs: 50, jitter: 0 } }));
    const retrying = waitFor(c, 'reconnecting', () => true, 3000);
    const connecting = c.connect();
    const first = await retrying;
    assert.equal(first.attempt, 1);
    own.resume();
    await connecting;
    assert.equal(c.state, 'open');
    c.close();
  } finally {
    own.resume();
    await own.dispose();
  }
});

test('a connection that goes silent is found by the heartbeat and replaced', async () => {
  const own = await new Daemon().start();
  try {
    const c = track(new VigilClient(own.url, {
      WebSocket: Tapped, heartbeatMs: 200, heartbeatTimeoutMs: 300, attemptTimeoutMs: 300,
      reconnect: { minDelayMs: 50, maxDelayMs: 50, jitter: 0 },
    }));
    await c.connect();
    // A quiet but healthy connection is probed and kept.
    const probes = waitFor(c, 'reconnecting', () => true, 700).then(() => 'reconnected', () => 'kept');
    assert.equal(await probes, 'kept');
    assert.equal(c.connections, 1);
    own.pause();  // the server says nothing any more, and closes nothing
    const stalled = await waitFor(c, 'stalled', () => true, 3000);
    assert.ok(stalled.silentMs >= 200);
    own.resume();
    await waitFor(c, 'reconnected', () => true, 5000);
    assert.ok(c.connections >= 2);
  } finally {
    own.resume();
    await own.dispose();
  }
});

test('a first watch cut off by a restart is answered after the reconnect', async () => {
  const phone = await client();
  const contact = await client();
  const owner = await phone.startPanic({ status: 'amber', lat: 7, lon: 7 });
  d.pause();  // the watch request waits in the kernel, never to be read by this process:
  const watching = contact.watch(owner.stream, owner.watchTokens[0]);
  let answered = false;
  watching.then(() => { answered = true; }, () => {});
  const back = waitFor(contact, 'reconnected', () => true, 10000);
  await d.stop('SIGKILL');  // (what it acknowledged before is in its journal)
  await d.start();
  await back;
  assert.equal(answered, false, 'not answered before the reconnect');
  const watch = await watching;
  assert.equal(watch.lastSeq, 1);
  await owner.update({ lat: 7.1, lon: 7 });
  await until(watch, 'event', () => watch.lastSeq === 2);
});

test('the client backs off with jitter between attempts while the server is down', async () => {
  const own = await new Daemon().start();
  try {
    const c = track(new VigilClient(own.url, { WebSocket: Tapped, reconnect: { minDelayMs: 20, maxDelayMs: 160, factor: 2, jitter: 0.5 } }));
    await c.connect();
    const delays = [];
    c.on('reconnecting', (e) => delays.push(e.delayMs));
    await own.stop();
    await until(c, 'reconnecting', () => delays.length >= 6, 10000);
    // 20, 40, 80, 160, 160, ... each cut by up to half.
    const caps = [20, 40, 80, 160, 160, 160];
    delays.slice(0, 6).forEach((ms, i) => assert.ok(ms <= caps[i] && ms >= caps[i] / 2, `attempt ${i + 1}: ${ms} ms`));
    await own.start();
    await waitFor(c, 'reconnected', () => true, 10000);
  } finally {
    await own.dispose();
  }
});

/**
 * A WebSocket whose connections are all refused: each fires `error` and, only with `thenClose`,
 * a `close` after it (a later task, as `ws` and browsers do). Node 20's built-in WebSocket was
 * seen firing the `error` alone. Each construction is told to `attempts` as `attempt`.
 */
function refusingWebSocket(attempts, { thenClose }) {
  return class RefusedWebSocket {
    constructor(url) {
      this.url = url;
      this.readyState = 0;
      attempts.emit('attempt', { at: Date.now() });
      setTimeout(() => {
        this.readyState = 3;
        this.onerror?.({ type: 'error' });
        if (thenClose) setTimeout(() => this.onclose?.({ code: 1006, reason: '' }), 0);
      }, 0);
    }

    send() { throw new Error('not open'); }
    close() {}
  };
}

test('a refused attempt that fires only error is retried after the backoff, not the attempt timeout', async () => {
  const attempts = new Emitter();
  const started = [];
  attempts.on('attempt', ({ at }) => started.push(at));
  // attemptTimeoutMs stays at its 10 s default: an attempt that waited for `close` would sit until then.
  const c = track(new VigilClient('ws://127.0.0.1:9/v1', {
    WebSocket: refusingWebSocket(attempts, { thenClose: false }), reconnect: { minDelayMs: 50, maxDelayMs: 50, jitter: 0 },
  }));
  const connecting = c.connect().catch((err) => err);
  const first = await waitFor(c, 'reconnecting', () => true, 2000);
  assert.equal(first.attempt, 1);
  await until(attempts, 'attempt', () => started.length >= 3, 2000);
  assert.ok(started[2] - started[0] < 2000, `three attempts took ${started[2] - started[0]} ms`);
  c.close();
  assert.equal((await connecting).code, 'closed');
});

test('a refused attempt whose error is followed by close is ended once', async () => {
  const attempts = new Emitter();
  const reconnects = [];
  // For each socket made: how many retries had been scheduled by then (one per failed attempt).
  const scheduledBefore = [];
  attempts.on('attempt', () => scheduledBefore.push(reconnects.length));
  const c = track(new VigilClient('ws://127.0.0.1:9/v1', {
    WebSocket: refusingWebSocket(attempts, { thenClose: true }), reconnect: { minDelayMs: 20, maxDelayMs: 20, jitter: 0 },
  }));
  c.on('reconnecting', (e) => reconnects.push(e.attempt));
  const connecting = c.connect().catch((err) => err);
  await until(attempts, 'attempt', () => scheduledBefore.length >= 4, 2000);
  c.close();
  assert.deepEqual(scheduledBefore.slice(0, 4), [0, 1, 2, 3], 'one retry per refused attempt');
  assert.deepEqual(reconnects.slice(0, 3), [1, 2, 3]);
  assert.equal((await connecting).code, 'closed');
});
