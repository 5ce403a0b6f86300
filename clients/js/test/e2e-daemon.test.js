// End-to-end encrypted streams through the library against a real vigild (docs/PROTOCOL.md,
// "End-to-end encrypted streams"): the owner seals, the server relays opaque bytes, the
// WatchModel opens; seq_mismatch after a status change the owner did not make; a circle's stream
// with a box per member, opened by a member with its secret; a rekey that leaves a member out.

import { test, before, after, afterEach } from 'node:test';
import assert from 'node:assert/strict';
import { VigilClient, WatchModel, e2e, KEY_NOTICES } from '../src/index.js';
import { Daemon, Tapped, track, closeClients } from './daemon.js';

let d;
before(async () => { d = await new Daemon({}).start(); });
after(async () => { await d.dispose(); });
afterEach(closeClients);

async function client() {
  const c = track(new VigilClient(d.url, { WebSocket: Tapped, reconnect: false, requestTimeoutMs: 5000 }));
  await c.connect();
  return c;
}

/** Resolves once the model has applied seq `seq` (its points opened or refused). */
async function reach(model, seq) {
  while (model.lastSeq < seq) await new Promise((resolve) => model.once('change', resolve));
  await model.settled();
}

test('a sealed stream: the server sees no position, the watcher with the key opens each update, a status change meanwhile is resealed', async () => {
  const phone = await client();
  const contact = await client();
  const owner = await phone.startPanic({ status: 'amber', lat: 51.5007193, lon: -0.1246377, accuracy_m: 12, note: 'js e2e note', e2e: true });
  const model = await WatchModel.open(contact, owner.stream, owner.watchTokens[0], { e2e: `k=${e2e.encodeKey(owner.e2e.key)}` });
  await model.settled();
  assert.equal(model.watch.state.e2e, true);
  assert.equal(model.watch.state.kid, owner.e2e.kid);
  assert.ok(!JSON.stringify(model.watch.state).includes('51.5007'));
  assert.deepEqual([model.last.lat, model.note], [51.5007193, 'js e2e note']);

  assert.equal(await owner.update({ lat: 51.5011, lon: -0.1252 }), 2);
  // Another connection with the owner token turns the stream red: the owner's next update is
  // sealed for seq 3 amber, refused with seq_mismatch, and sealed again for seq 4 red.
  const other = await client();
  await other.request('panic.status', { stream: owner.stream, owner_token: owner.ownerToken, status: 'red' });
  const resealed = [];
  owner.on('resealed', (r) => resealed.push(r));
  assert.equal(await owner.update({ lat: 51.5019, lon: -0.1261 }), 4);
  assert.deepEqual(resealed, [{ seq: 4, status: 'red' }]);
  await reach(model, 4);
  assert.deepEqual(model.points.map((p) => [p.seq, p.ok]), [[1, true], [2, true], [4, true]]);
  assert.equal(model.last.lat, 51.5019);
  assert.equal(model.status, 'red');
  assert.equal(model.notice, null);
});

test('a circle\'s e2e stream: a member opens its own box; after a rekey without it, it opens nothing new', async () => {
  const phone = await client();
  const mum = await client();
  const sam = await client();
  const circle = await phone.createCircle(['Mum', 'Sam']);
  const secrets = new Map([[1, await e2e.newMemberSecret()], [2, await e2e.newMemberSecret()]]);
  const owner = await circle.startPanic({ status: 'red', lat: 48.2082, lon: 16.3738, e2e: true, memberSecrets: secrets });
  const [mumToken, samToken] = circle.memberTokens.map((m) => m.token);
  const mumModel = await WatchModel.open(mum, owner.stream, { memberToken: mumToken }, { e2e: { memberSecret: secrets.get(1), member: 1 } });
  const samModel = await WatchModel.open(sam, owner.stream, { memberToken: samToken }, { e2e: { memberSecret: secrets.get(2), member: 2 } });
  await mumModel.settled();
  await samModel.settled();
  assert.equal(mumModel.last.lat, 48.2082);
  assert.equal(samModel.last.lat, 48.2082);
  // Sam's secret does not open Mum's box.
  const wrong = await WatchModel.open(await client(), owner.stream, { memberToken: mumToken }, { e2e: { memberSecret: secrets.get(2), member: 1 } });
  await wrong.settled();
  assert.equal(wrong.last, null);
  assert.equal(wrong.notice, KEY_NOTICES.box);

  await circle.revoke(2);
  await owner.rekey({ memberSecrets: new Map([[1, secrets.get(1)]]) });
  const seq = await owner.update({ lat: 48.21, lon: 16.38 });
  await reach(mumModel, seq);
  assert.equal(mumModel.last.lat, 48.21, 'the member kept opens under the new key (its new box came with panic.rekeyed)');
  assert.equal(mumModel.notice, null);
});
