// Check-in circles through the library against a real vigild: Circle's state kept by the news,
// the owner's and members' operations, a revocation, re-joining after a restart; a panic started
// for a circle (checkin.panic, the circle's `panics`, watching with a member token); push
// subscriptions (registerPush/registerRelay/unregister).

import { test, before, after, afterEach } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createECDH, randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { VigilClient, Circle } from '../src/index.js';
import { Daemon, Tapped, VIGILD, track, closeClients, waitFor, until } from './daemon.js';

let d;
before(async () => {
  d = await new Daemon({ checkin: { requests_per_minute: 60 } }, { stateful: true }).start();
});
after(async () => { await d.dispose(); });
afterEach(closeClients);

const fast = { minDelayMs: 50, maxDelayMs: 200 };

async function client(daemon = d, reconnect = false) {
  const c = track(new VigilClient(daemon.url, { WebSocket: Tapped, reconnect }));
  await c.connect();
  return c;
}

test('a circle: state, ask, answer, home safe, invite and revoke, as the owner and a member see them', async () => {
  const phone = await client();
  const mum = await client();
  const circle = await phone.createCircle(['Mum', null]);
  assert.ok(circle instanceof Circle);
  assert.equal(circle.role, 'owner');
  assert.equal(circle.memberTokens.length, 2);
  assert.deepEqual(circle.memberTokens.map((m) => [m.member, m.label]), [[1, 'Mum'], [2, null]]);
  assert.deepEqual(circle.state.members.map((m) => m.member), [1, 2]);
  assert.deepEqual(circle.panics, []);

  const joined = await mum.joinCircle(circle.id, circle.memberTokens[0].token);
  assert.equal(joined.role, 'member');
  assert.deepEqual(joined.state.you, { member: 1, label: 'Mum' });

  const heard = waitFor(circle, 'requested');
  const at = await joined.request();
  assert.equal((await heard).member, 1);
  assert.deepEqual(circle.state.requests, [{ member: 1, label: 'Mum', at }]);
  await until(joined, 'change', () => joined.state.requests.length === 1);

  const answered = waitFor(joined, 'answered');
  const answer = await circle.answer({ note: 'on the bus' });
  assert.equal(answer.note, 'on the bus');
  await answered;
  assert.equal(joined.state.answer.note, 'on the bus');
  assert.deepEqual(joined.state.requests, []);

  const home = await circle.home({ for_s: 600 });
  await until(joined, 'home', () => joined.state.home?.until === home.until);
  assert.equal(await circle.home({ clear: true }), null);
  await until(joined, 'home', () => joined.state.home === undefined);

  const alex = await circle.invite('Alex');
  assert.equal(alex.member, 3);
  assert.equal(typeof alex.token, 'string');
  assert.deepEqual(circle.state.members.map((m) => m.member), [1, 2, 3]);
  const revoked = waitFor(joined, 'revoked');
  await circle.revoke(1);
  await revoked;
  assert.equal(joined.active, false);
  assert.deepEqual(circle.state.members.map((m) => m.member), [2, 3]);
  const err = await mum.joinCircle(circle.id, circle.memberTokens[0].token).catch((e) => e);
  assert.equal(err.code, 'forbidden');
  const wrong = await mum.joinCircle(circle.id, circle.ownerToken).catch((e) => e);
  assert.equal(wrong.code, 'forbidden', 'the owner token is no member token');
});

test('a circle is opened again after a restart, and its new state says what was missed', async () => {
  const phone = await client();
  const circle = await phone.createCircle(['Sam']);
  const sam = await client(d, fast);
  const joined = await sam.joinCircle(circle.id, circle.memberTokens[0].token);
  const states = [];
  joined.on('state', (s) => states.push(s));
  const back = waitFor(sam, 'reconnected', () => true, 15000);
  await d.restart();
  await back;
  // The owner answers while Sam may or may not be listening again: the state or the news has it.
  const owner = await client();
  const opened = await owner.openCircle(circle.id, circle.ownerToken);
  await opened.answer({ note: 'after the restart' });
  await until(joined, 'change', () => joined.state.answer?.note === 'after the restart', 10000);
  assert.ok(states.length >= 1, 're-joined after the reconnect');
  assert.equal(joined.active, true);
});

test('a member whose invitation was withdrawn while it was away is told so when it reconnects', async () => {
  const phone = await client();
  const circle = await phone.createCircle(['Sam']);
  // Back only 3 s after the restart: the owner withdraws the invitation meanwhile.
  const sam = await client(d, { minDelayMs: 3000, maxDelayMs: 3000, jitter: 0 });
  const joined = await sam.joinCircle(circle.id, circle.memberTokens[0].token);
  let errors = 0;
  joined.on('error', () => errors++);
  const refused = waitFor(joined, 'error', () => true, 15000);
  const lost = waitFor(sam, 'disconnected');
  await d.restart();
  await lost;
  const owner = await client();
  await (await owner.openCircle(circle.id, circle.ownerToken)).revoke(1);
  assert.equal(sam.connections, 1, 'Sam must not be back yet');
  const err = await refused;
  assert.equal(err.code, 'forbidden');
  assert.equal(joined.active, false);
  // Not listened to again at the next reconnect.
  const again = waitFor(sam, 'reconnected', () => true, 15000);
  sam.reconnectNow();
  await again;
  await sam.request('checkin.leave', { circle: 'AAAAAAAAAAAAAAAAAAAAAA' });  // a barrier behind any re-join
  assert.equal(errors, 1, 'not joined again');
});

test('a panic for a circle: checkin.panic, the circle\'s panics, watching with a member token', async () => {
  const phone = await client();
  const mum = await client();
  const circle = await phone.createCircle(['Mum', 'Sam']);
  const joined = await mum.joinCircle(circle.id, circle.memberTokens[0].token);
  const started = waitFor(joined, 'panic', (e) => e.event === 'started');
  const owner = await circle.startPanic({ status: 'red', lat: 52.5, lon: 13.4, accuracy_m: 10 });
  assert.equal(owner.circle, circle.id);
  const news = await started;
  assert.deepEqual([news.type, news.circle, news.stream, news.status], ['checkin.panic', circle.id, owner.stream, 'red']);
  assert.deepEqual(joined.panics.map((p) => [p.stream, p.status]), [[owner.stream, 'red']]);
  await until(circle, 'change', () => circle.panics.length === 1);

  // The member watches with its member token; a member who joins later finds it in the state.
  const watch = await joined.watch(owner.stream);
  assert.equal(watch.credential, 'member_token');
  assert.equal(watch.state.status, 'red');
  const late = await client();
  const again = await late.joinCircle(circle.id, circle.memberTokens[0].token);
  assert.deepEqual(again.panics.map((p) => p.stream), [owner.stream]);
  const direct = await late.watch(owner.stream, { memberToken: circle.memberTokens[0].token, since: 1 });
  assert.equal(direct.lastSeq, 1);

  await owner.update({ lat: 52.51, lon: 13.41 });
  await until(watch, 'event', () => watch.lastSeq === 2);

  // Sam watches too, until the owner withdraws Sam's invitation: both the circle and the watch end.
  const sam = await client();
  const samCircle = await sam.joinCircle(circle.id, circle.memberTokens[1].token);
  const samWatch = await samCircle.watch(owner.stream);
  const watchRevoked = waitFor(samWatch, 'revoked');
  const circleRevoked = waitFor(samCircle, 'revoked');
  await circle.revoke(2);
  await Promise.all([watchRevoked, circleRevoked]);
  assert.equal(samWatch.active, false);
  const refused = await sam.watch(owner.stream, { memberToken: circle.memberTokens[1].token }).catch((e) => e);
  assert.equal(refused.code, 'forbidden');
  const ended = waitFor(joined, 'panic', (e) => e.event === 'ended');
  await owner.end('safe');
  assert.equal((await ended).reason, 'safe');
  assert.deepEqual(joined.panics, []);
  const wrong = await late.watch(owner.stream, { memberToken: circle.ownerToken }).catch((e) => e);
  assert.equal(wrong.code, 'forbidden');
});

test('a circle\'s walk-home stream that misses its check-in is told to the circle as escalated', async () => {
  const phone = await client();
  const mum = await client();
  const circle = await phone.createCircle(['Mum']);
  const joined = await mum.joinCircle(circle.id, circle.memberTokens[0].token);
  const owner = await circle.startPanic({ status: 'amber', lat: 48.2, lon: 16.37, due_in_s: 1 });
  await until(joined, 'panic', () => joined.panics.length === 1);
  assert.equal(joined.panics[0].status, 'amber');
  const escalated = await waitFor(joined, 'panic', (e) => e.event === 'escalated', 5000);
  assert.equal(escalated.status, 'red');
  assert.deepEqual(joined.panics.map((p) => [p.stream, p.status, p.escalated_at]), [[owner.stream, 'red', escalated.at]]);
  // A member who joins now reads the same from the state.
  const late = await (await client()).joinCircle(circle.id, circle.memberTokens[0].token);
  assert.deepEqual(late.panics.map((p) => [p.stream, p.status, p.escalated_at]), [[owner.stream, 'red', escalated.at]]);
  await owner.end('safe');
});

test('push subscriptions: registerPush with toJSON()\'s shape, unregister; registerRelay without a relay is unsupported', async () => {
  const own = new Daemon();
  const key = join(own.dir, 'vapid.pem');
  execFileSync(VIGILD, ['push', 'keygen', key], { stdio: 'ignore' });
  const push = new Daemon({ push: { vapid_key_file: key, vapid_subject: 'mailto:ops@example.org', allow_loopback_http: true } });
  try {
    await push.start();
    const phone = await client(push);
    const circle = await phone.createCircle(['Mum']);
    const ecdh = createECDH('prime256v1');
    ecdh.generateKeys();
    const subscription = {
      endpoint: 'http://127.0.0.1:9/push/s1',
      expirationTime: null,   // as PushSubscription.toJSON() has it: not sent
      keys: { p256dh: ecdh.getPublicKey().toString('base64url'), auth: randomBytes(16).toString('base64url') },
    };
    const mum = await client(push);
    const id = await mum.registerPush(circle.id, { memberToken: circle.memberTokens[0].token }, subscription);
    assert.equal(typeof id, 'string');
    // The same endpoint again (a browser that subscribed again) is the same subscription.
    assert.equal(await mum.registerPush(circle.id, { memberToken: circle.memberTokens[0].token }, subscription), id);
    const mine = await phone.openCircle(circle.id, circle.ownerToken);
    const ownerId = await mine.registerPush(subscription);
    assert.notEqual(ownerId, id);
    await mum.unregister(circle.id, { memberToken: circle.memberTokens[0].token }, id);
    const relay = await mine.registerRelay('app-handle-1').catch((e) => e);
    assert.equal(relay.code, 'unsupported');
    const bad = await mum.registerPush(circle.id, { memberToken: 'x'.repeat(43) }, subscription).catch((e) => e);
    assert.equal(bad.code, 'forbidden');
    await assert.rejects(mum.registerPush(circle.id, {}, subscription), TypeError);
  } finally {
    await push.dispose();
    await own.dispose();
  }
});
