// Reconnection under a restart of a real vigild (with a state directory, so pins and streams
// survive it): a watcher sees every event exactly once and in order, or an explicit gap; a map
// subscriber's pin set is reconciled from the new subscribe reply; an owner is resumed.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { VigilClient, MapModel, WatchModel } from '../src/index.js';
import { Daemon, Tapped, waitFor, until } from './daemon.js';

let d;
before(async () => { d = await new Daemon({ panic: { history_events: 50 } }, { stateful: true }).start(); });
after(async () => { await d.dispose(); });

// Fast reconnects for the owner and the subscriber; the watcher comes back later on purpose, so
// that events sent while it is away must reach it by replay.
const fast = { minDelayMs: 50, maxDelayMs: 200, factor: 2, jitter: 0.5 };
const slow = { minDelayMs: 2500, maxDelayMs: 2500, factor: 1, jitter: 0.1 };

async function client(reconnect = fast) {
  const c = new VigilClient(d.url, { WebSocket: Tapped, reconnect, requestTimeoutMs: 5000 });
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
  phone.close();
  contact.close();
});

test('a watcher that missed more than the server holds is told so with gap and the current state', async () => {
  const own = await new Daemon({ panic: { history_events: 3 } }, { stateful: true }).start();
  try {
    const phone = new VigilClient(own.url, { WebSocket: Tapped, reconnect: fast });
    const contact = new VigilClient(own.url, { WebSocket: Tapped, reconnect: slow });
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
    const c = new VigilClient(own.url, { WebSocket: Tapped, attemptTimeoutMs: 200, reconnect: { minDelayMs: 50, maxDelayMs: 50, jitter: 0 } });
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

test('the client backs off with jitter between attempts while the server is down', async () => {
  const own = await new Daemon().start();
  const c = new VigilClient(own.url, { WebSocket: Tapped, reconnect: { minDelayMs: 20, maxDelayMs: 160, factor: 2, jitter: 0.5 } });
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
  c.close();
  await own.dispose();
});
