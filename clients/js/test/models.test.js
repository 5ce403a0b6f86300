// The models against a real vigild: MapModel follows the pin events of its area, WatchModel a
// stream (locations, status, stale, end, revocation), and followPosition bounds the update rate.

import { test, before, after, afterEach } from 'node:test';
import assert from 'node:assert/strict';
import { VigilClient, MapModel, WatchModel, followPosition, Emitter } from '../src/index.js';
import { Daemon, Tapped, track, closeClients, waitFor, until } from './daemon.js';

let d;
before(async () => {
  d = await new Daemon({ panic: { stale_after_ms: 1000 }, pins: { min_ttl_s: 1 } }).start();
});
after(async () => { await d.dispose(); });
afterEach(closeClients);

async function client() {
  const c = track(new VigilClient(d.url, { WebSocket: Tapped, reconnect: false }));
  await c.connect();
  return c;
}

test('MapModel: the pins of the area, added, updated, removed and expired by events', async () => {
  const viewer = await client();
  const other = await client();
  const map = new MapModel(viewer);
  const outside = await other.request('pin.create', { pin: { lat: 10, lon: 10, title: 'far' } });
  const before = await other.request('pin.create', { pin: { lat: 30.5, lon: 30.5, title: 'before', category: 'hazard' } });
  await viewer.subscribe({ bbox: [30, 30, 31, 31] });
  assert.deepEqual([...map.pins.keys()], [before.pin.id]);

  const created = await other.request('pin.create', { pin: { lat: 30.2, lon: 30.2, title: 'new', ttl_s: 1 } });
  await until(map, 'change', () => map.pins.has(created.pin.id));
  await other.request('pin.update', { id: before.pin.id, edit_token: before.edit_token, changes: { title: 'edited' } });
  await until(map, 'change', () => map.pins.get(before.pin.id).title === 'edited');
  const removed = waitFor(map, 'removed', (e) => e.pin.id === before.pin.id);
  await other.request('pin.delete', { id: before.pin.id, edit_token: before.edit_token });
  assert.equal((await removed).reason, 'deleted');
  const expired = await waitFor(map, 'removed', (e) => e.pin.id === created.pin.id, 5000);
  assert.equal(expired.reason, 'expired');
  assert.equal(map.pins.size, 0);
  assert.ok(!map.pins.has(outside.pin.id));
  assert.equal(MapModel.timeLeftMs(created.pin, created.pin.expires_at - 1500), 1500);
  assert.equal(MapModel.timeLeftMs(created.pin, created.pin.expires_at + 10), 0);
  viewer.close();
  other.close();
});

test('WatchModel: position, trail, status, signal lost (stale), end', async () => {
  const phone = await client();
  const contact = await client();
  const owner = await phone.startPanic({ status: 'amber', lat: 20, lon: 20, accuracy_m: 30, note: 'walking home' });
  const watchers = waitFor(owner, 'watchers', (n) => n === 1);
  const model = await WatchModel.open(contact, owner.stream, owner.watchTokens[0]);
  await watchers;
  assert.equal(model.status, 'amber');
  assert.equal(model.note, 'walking home');
  assert.equal(model.trail.length, 1);
  await owner.update({ lat: 20.001, lon: 20.002, accuracy_m: 12, heading: 90 });
  await until(model, 'change', () => model.trail.length === 2);
  assert.deepEqual([model.last.lat, model.last.lon, model.last.accuracy_m, model.last.heading], [20.001, 20.002, 12, 90]);
  await owner.setStatus('red');
  await until(model, 'change', () => model.status === 'red');
  // No location for stale_after_ms (1 s): the server says so once.
  await until(model, 'change', () => model.stale, 5000);
  await owner.update({ lat: 20.003, lon: 20.002 });
  await until(model, 'change', () => !model.stale);
  await owner.end('safe');
  await until(model, 'change', () => model.ended !== null);
  assert.equal(model.ended.reason, 'safe');
  phone.close();
  contact.close();
});

test('WatchModel.open with since 0: every point of the trail once, from the replay', async () => {
  const phone = await client();
  const contact = await client();
  const owner = await phone.startPanic({ status: 'red', lat: 40, lon: 40 });
  for (let i = 1; i <= 5; i++) await owner.update({ lat: 40 + i / 1000, lon: 40 });
  const model = await WatchModel.open(contact, owner.stream, owner.watchTokens[0], { since: 0 });
  await until(model, 'change', () => model.watch.lastSeq === 6);  // the replay's last event
  assert.deepEqual(model.trail.map((p) => p.seq), [1, 2, 3, 4, 5, 6]);
  assert.equal(model.lastSeq, 6);
  assert.equal(model.last.lat, 40.005);
  phone.close();
  contact.close();
});

test('Safety timer: moved by the owner, then missed: the model and the owner learn of the escalation', async () => {
  const phone = await client();
  const contact = await client();
  const owner = await phone.startPanic({ status: 'amber', lat: 20, lon: 20, due_in_s: 600 });
  assert.equal(typeof owner.dueAt, 'number');
  const model = await WatchModel.open(contact, owner.stream, owner.watchTokens[0]);
  assert.equal(model.dueAt, owner.dueAt);
  const dueAt = Date.now() + 1500;
  assert.equal(await owner.setTimer({ due_at: dueAt }), dueAt);
  await until(model, 'change', () => model.dueAt === dueAt);
  await owner.update({ lat: 21, lon: 22, accuracy_m: 7 });
  const missed = waitFor(owner, 'missedCheckIn', () => true, 5000);
  await until(model, 'change', () => model.escalated !== null, 5000);
  // `at` is the deadline; `sent_at` when the server raised the alarm (a tick later, at most).
  const sentAt = model.escalated.sent_at;
  assert.ok(sentAt >= dueAt && sentAt <= Date.now(), `sent_at ${sentAt}, due ${dueAt}`);
  assert.deepEqual(model.escalated, { reason: 'missed_check_in', at: dueAt, sent_at: sentAt });
  assert.equal(model.status, 'red');
  assert.equal(model.dueAt, null);
  assert.deepEqual([model.last.lat, model.last.lon, model.last.accuracy_m], [21, 22, 7]);
  const event = await missed;
  assert.deepEqual([event.due_at, event.at, event.sent_at], [dueAt, dueAt, sentAt]);
  assert.equal(owner.status, 'red');
  assert.equal(owner.dueAt, null);
  assert.deepEqual(owner.escalated, { reason: 'missed_check_in', at: dueAt, sent_at: sentAt });
  // A new tab of the same phone resumes the stream and learns that the alarm was raised.
  const tab = await client();
  const resumed = await tab.resumePanic(owner.stream, owner.ownerToken);
  assert.deepEqual(resumed.escalated, { reason: 'missed_check_in', at: dueAt, sent_at: sentAt });
  assert.equal(resumed.status, 'red');
  tab.close();
  await owner.end('safe');
  await until(model, 'change', () => model.ended !== null);
  phone.close();
  contact.close();
});

test('WatchModel.open sees the events that arrive together with the watch reply', async () => {
  const phone = await client();
  const contact = await client();
  const owner = await phone.startPanic({ status: 'red', lat: 3, lon: 3 });
  // With the daemon stopped, the watch and then three updates queue up: it handles them in one
  // turn, and the reply and the three events reach the contact back to back (whether the
  // WebSocket implementation then delivers them in one task or several, none may be missed).
  d.pause();
  let opened;
  let updates;
  try {
    opened = WatchModel.open(contact, owner.stream, owner.watchTokens[0]);
    updates = Promise.all([1, 2, 3].map((i) => owner.update({ lat: 3 + i / 100, lon: 3 })));
  } finally {
    d.resume();
  }
  const model = await opened;
  await updates;
  await until(model, 'change', () => model.lastSeq === 4);
  assert.deepEqual(model.trail.map((p) => p.seq), [1, 2, 3, 4]);
  phone.close();
  contact.close();
});

test('WatchModel: revocation', async () => {
  const phone = await client();
  const contact = await client();
  const owner = await phone.startPanic({ status: 'red', lat: 1, lon: 1, watchers: 2 });
  const watch = await contact.watch(owner.stream, owner.watchTokens[1]);
  const model = new WatchModel(watch);
  await owner.revoke(owner.watchTokens[1]);
  await until(model, 'change', () => model.revoked);
  assert.equal(watch.active, false);
  const err = await contact.watch(owner.stream, watch.token).catch((e) => e);
  assert.equal(err.code, 'forbidden');
  await owner.end('cancelled');
  phone.close();
  contact.close();
});

test('followPosition: a fast feed becomes updates at most one per interval, the newest winning', async () => {
  const phone = await client();
  const owner = await phone.startPanic({ status: 'red', lat: 5, lon: 5 });
  let emit;
  let stopped = false;
  const source = (onPosition) => { emit = onPosition; return () => { stopped = true; }; };
  const sent = [];
  const progress = new Emitter();
  // The bound is on when updates are sent; answers can bunch up behind a slow one, so the send
  // times are taken where the follower calls the owner.
  const sendTimes = [];
  const timed = { update: (u, opts) => { sendTimes.push(Date.now()); return owner.update(u, opts); } };
  const stop = followPosition(timed, source, { minIntervalMs: 200, onSent: (seq, u) => { sent.push({ seq, u }); progress.emit('sent'); } });
  const started = Date.now();
  // 40 positions over about 800 ms (the browser's shape is accepted too).
  for (let i = 1; i <= 40; i++) {
    emit(i % 2 ? { lat: 5 + i / 1000, lon: 5 } : { coords: { latitude: 5 + i / 1000, longitude: 5, accuracy: 7, heading: null, speed: 1.5 } });
    await new Promise((r) => setTimeout(r, 20));
  }
  await until(progress, 'sent', () => sent.at(-1)?.u.lat === 5.04, 3000);
  const elapsed = Date.now() - started;
  stop();
  assert.ok(stopped);
  assert.ok(sent.length >= 3 && sent.length <= Math.ceil(elapsed / 200) + 1, `${sent.length} updates in ${elapsed} ms`);
  assert.equal(sendTimes.length, sent.length);
  for (let i = 1; i < sendTimes.length; i++) assert.ok(sendTimes[i] - sendTimes[i - 1] >= 199, `sent ${sendTimes[i] - sendTimes[i - 1]} ms apart`);
  assert.deepEqual(sent.map((s) => s.seq), sent.map((_, i) => i + 2));
  assert.deepEqual(sent.at(-1).u, { lat: 5.04, lon: 5, accuracy_m: 7, speed_mps: 1.5 });
  await owner.end('safe');
  phone.close();
});
