// The JS client on an end-to-end encrypted stream's wire (docs/PROTOCOL.md, "End-to-end encrypted
// streams"), against a stand-in server in this process that speaks exactly that wire and keeps
// every frame it received: the owner seals the start for seq 1 and every update for the seq and
// status it expects, reseals after seq_mismatch, rekeys with new boxes; the WatchModel opens
// each point or reports it as "cannot decrypt this update", never as a position. The same
// behaviour against a real vigild is in e2e-daemon.test.js (once the server serves e2e).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { VigilClient, WatchModel, e2e, CANNOT_DECRYPT, KEY_NOTICES } from '../src/index.js';

const b64 = (n) => e2e.base64urlEncode(new Uint8Array(n).map(() => Math.floor(Math.random() * 256)));

/** A stand-in vigild for e2e streams: one stream table, sockets in this process. */
class StandIn {
  constructor() {
    this.streams = new Map();
    this.frames = [];  // every request received, as sent
    this.sockets = new Set();
    const server = this;
    this.WebSocket = class {
      constructor() {
        this.readyState = 0;
        server.sockets.add(this);
        queueMicrotask(() => {
          this.readyState = 1;
          this.onopen?.();
          this.deliver({ type: 'welcome', session: b64(16), limits: {} });
        });
      }
      deliver(msg) { queueMicrotask(() => { if (this.readyState === 1) this.onmessage?.({ data: JSON.stringify(msg) }); }); }
      send(text) { server.#receive(this, JSON.parse(text)); }
      close() { this.readyState = 3; server.sockets.delete(this); }
    };
  }

  #receive(ws, m) {
    this.frames.push(m);
    const ok = (fields) => ws.deliver({ type: 'ok', ref: m.ref, ...fields });
    const fail = (code, extra = {}) => ws.deliver({ type: 'error', ref: m.ref, code, message: code, ...extra });
    const s = this.streams.get(m.stream);
    switch (m.op) {
      case 'panic.start': {
        if (!m.e2e || m.lat !== undefined || m.note !== undefined) return fail('invalid_e2e');
        const id = b64(16);
        const st = { id, seq: 1, status: m.status, kid: m.e2e.kid, boxes: m.e2e.boxes ?? [], watchers: new Map(), owner: b64(32), tokens: [b64(32)],
          trail: [{ seq: 1, sealed: m.e2e.sealed, kid: m.e2e.kid, status: m.status, at: Date.now() }] };
        this.streams.set(id, st);
        return ok({ stream: id, seq: 1, owner_token: st.owner, watch_tokens: st.tokens });
      }
      case 'panic.update':
        if (m.lat !== undefined) return fail('sealed_required');
        if (m.seq !== s.seq + 1 || m.status !== s.status) return fail('seq_mismatch', { current_seq: s.seq, status: s.status });
        if (m.kid !== s.kid) return fail('invalid_kid');
        s.seq++;
        this.publish(s, { type: 'panic.location', stream: s.id, seq: s.seq, sealed: m.sealed, kid: m.kid, status: m.status, at: Date.now() });
        return ok({ seq: s.seq });
      case 'panic.status':
        s.status = m.status; s.seq++;
        this.publish(s, { type: 'panic.status', stream: s.id, seq: s.seq, status: m.status, at: Date.now() });
        return ok({ seq: s.seq });
      case 'panic.rekey':
        s.kid = m.kid; s.boxes = m.boxes ?? [];
        for (const [w, member] of s.watchers) {
          const box = member !== null ? s.boxes.find((b) => b.member === member) : undefined;
          w.deliver({ type: 'panic.rekeyed', stream: s.id, kid: m.kid, ...(box ? { box: box.box } : {}) });
        }
        return ok({});
      case 'panic.watch': {
        if (!s) return fail('forbidden');
        const member = m.member_token ? Number(m.member_token.split(':')[1]) : null;
        s.watchers.set(ws, member);
        const box = member !== null ? s.boxes.find((b) => b.member === member) : undefined;
        const last = s.trail.at(-1);
        return ok({ state: { stream: s.id, status: s.status, seq: s.seq, e2e: true, last, trail: s.trail }, ...(box ? { box: box.box } : {}) });
      }
      default:
        return ok({});
    }
  }

  /** Sends `event` to the stream's watchers (and keeps its location in the trail). */
  publish(s, event) {
    if (event.type === 'panic.location') s.trail.push({ seq: event.seq, sealed: event.sealed, kid: event.kid, status: event.status, at: event.at });
    for (const w of s.watchers.keys()) w.deliver(event);
  }

  /** A server event of its own (the escalation, a status change): takes a seq the owner does not know. */
  bump(s, status) {
    s.status = status; s.seq++;
    this.publish(s, { type: 'panic.status', stream: s.id, seq: s.seq, status, at: Date.now() });
  }
}

async function pair(server) {
  const connect = async () => {
    const c = new VigilClient('ws://stand-in/v1', { WebSocket: server.WebSocket, reconnect: false, requestTimeoutMs: 3000 });
    await c.connect();
    return c;
  };
  return [await connect(), await connect()];
}

const collect = (model) => {
  const points = [];
  const notices = [];
  model.on('point', (p) => points.push(p));
  model.on('notice', (n) => notices.push(n));
  return { points, notices };
};

test('an e2e start sends no position in clear, and a watcher with the key opens every point', async () => {
  const server = new StandIn();
  const [phone, contact] = await pair(server);
  const owner = await phone.startPanic({ status: 'red', lat: 51.5007, lon: -0.1246, accuracy_m: 12, note: 'by the bridge', e2e: true });
  assert.ok(owner.e2e.key instanceof Uint8Array && owner.e2e.key.length === 32);
  assert.ok(e2e.isKid(owner.e2e.kid));
  const start = server.frames.find((f) => f.op === 'panic.start');
  // Nothing of the position, in any member: only the sealed value, which opens for seq 1 red.
  for (const field of ['lat', 'lon', 'accuracy_m', 'note']) assert.equal(start[field], undefined, field);
  assert.ok(!JSON.stringify(start).includes('51.5007') && !JSON.stringify(start).includes('bridge'));
  assert.deepEqual(Object.keys(start.e2e).sort(), ['kid', 'sealed', 'v']);
  assert.equal(start.boxes, undefined);
  assert.equal(start.e2e.v, 1);
  assert.deepEqual(await e2e.open(owner.e2e.key, start.e2e.kid, 1, 'red', start.e2e.sealed),
    { lat: 51.5007, lon: -0.1246, accuracy_m: 12, note: 'by the bridge' });

  const model = await WatchModel.open(contact, owner.stream, owner.watchTokens[0], { e2e: `s=x&t=y&k=${e2e.encodeKey(owner.e2e.key)}` });
  const seen = collect(model);
  await model.settled();
  assert.deepEqual(model.last, { lat: 51.5007, lon: -0.1246, accuracy_m: 12, note: 'by the bridge', at: model.last.at });
  assert.equal(model.note, 'by the bridge');
  assert.equal(model.notice, null);

  assert.equal(await owner.update({ lat: 51.501, lon: -0.125, heading: 90 }), 2);
  const upd = server.frames.find((f) => f.op === 'panic.update');
  assert.equal(upd.lat, undefined);
  assert.equal(upd.seq, 2);
  assert.equal(upd.status, 'red');
  await owner.update({ lat: 51.502, lon: -0.126 });
  // The watcher's events may still be on their way: wait for the model to hold seq 3.
  while (model.lastSeq < 3) await new Promise((resolve) => model.once('change', resolve));
  await model.settled();
  assert.deepEqual(seen.points.map((p) => [p.seq, p.ok, p.position?.lat]), [[1, true, 51.5007], [2, true, 51.501], [3, true, 51.502]]);
  assert.deepEqual(model.trail.map((p) => p.lat), [51.5007, 51.501, 51.502]);
  assert.equal(model.last.lat, 51.502);
  assert.deepEqual(seen.notices, []);
  phone.close(); contact.close();
});

test('seq_mismatch: the owner reseals for the server\'s current seq + 1 and status, and the watcher opens it', async () => {
  const server = new StandIn();
  const [phone, contact] = await pair(server);
  const owner = await phone.startPanic({ status: 'amber', lat: 10, lon: 20, e2e: true });
  const model = await WatchModel.open(contact, owner.stream, owner.watchTokens[0], { e2e: { key: owner.e2e.key } });
  const seen = collect(model);
  const s = server.streams.get(owner.stream);
  server.bump(s, 'red');  // an event the owner's client never heard of (seq 2, red)
  server.bump(s, 'red');  // seq 3
  const resealed = [];
  owner.on('resealed', (r) => resealed.push(r));
  assert.equal(await owner.update({ lat: 10.5, lon: 20.5 }), 4);
  const updates = server.frames.filter((f) => f.op === 'panic.update');
  assert.deepEqual(updates.map((u) => [u.seq, u.status]), [[2, 'amber'], [4, 'red']]);
  assert.notEqual(updates[0].sealed, updates[1].sealed);
  assert.deepEqual(resealed, [{ seq: 4, status: 'red' }]);
  assert.equal(owner.status, 'red');
  while (model.lastSeq < 4) await new Promise((resolve) => model.once('change', resolve));
  await model.settled();
  assert.deepEqual(seen.points.map((p) => [p.seq, p.ok]), [[1, true], [4, true]]);
  assert.equal(model.last.lat, 10.5);
  phone.close(); contact.close();
});

test('seq_mismatch without end fails after maxReseals, with the server\'s error', async () => {
  const server = new StandIn();
  const [phone] = await pair(server);
  const owner = await phone.startPanic({ status: 'red', lat: 1, lon: 2, e2e: true });
  owner.maxReseals = 2;
  const s = server.streams.get(owner.stream);
  // Each time the owner reseals, the server moves on again.
  const realFrames = server.frames.push.bind(server.frames);
  server.frames.push = (f) => { if (f.op === 'panic.update') s.seq++; return realFrames(f); };
  await assert.rejects(owner.update({ lat: 1, lon: 2 }), (err) => err.code === 'seq_mismatch');
  assert.equal(server.frames.filter((f) => f.op === 'panic.update').length, 3);
  phone.close();
});

test('tampered, replayed under another seq, and moved from another stream: each is "cannot decrypt this update", never a position', async () => {
  const server = new StandIn();
  const [phone, contact] = await pair(server);
  const owner = await phone.startPanic({ status: 'red', lat: 48.1, lon: 11.5, e2e: true });
  const other = await phone.startPanic({ status: 'red', lat: 40, lon: -3, e2e: true });
  const model = await WatchModel.open(contact, owner.stream, owner.watchTokens[0], { e2e: { key: owner.e2e.key } });
  const seen = collect(model);
  await model.settled();
  const s = server.streams.get(owner.stream);
  const { key, kid } = owner.e2e;
  const good = await e2e.seal(key, kid, 2, 'red', { lat: 48.2, lon: 11.6 });
  const bytes = e2e.base64urlDecode(good);
  bytes[20] ^= 1;
  const tampered = e2e.base64urlEncode(bytes);
  const otherSealed = await e2e.seal(other.e2e.key, other.e2e.kid, 4, 'red', { lat: 40.1, lon: -3.1 });
  const at = Date.now();
  s.seq = 5;
  server.publish(s, { type: 'panic.location', stream: s.id, seq: 2, sealed: good, kid, status: 'red', at });
  server.publish(s, { type: 'panic.location', stream: s.id, seq: 3, sealed: tampered, kid, status: 'red', at });
  server.publish(s, { type: 'panic.location', stream: s.id, seq: 4, sealed: good, kid, status: 'red', at });  // replayed: sealed for 2
  server.publish(s, { type: 'panic.location', stream: s.id, seq: 5, sealed: otherSealed, kid: other.e2e.kid, status: 'red', at });
  while (model.lastSeq < 5) await new Promise((resolve) => model.once('change', resolve));
  await model.settled();
  assert.deepEqual(seen.points.map((p) => [p.seq, p.ok, p.label ?? null]),
    [[1, true, null], [2, true, null], [3, false, CANNOT_DECRYPT], [4, false, CANNOT_DECRYPT], [5, false, CANNOT_DECRYPT]]);
  for (const p of seen.points.filter((x) => !x.ok)) assert.equal(p.position, undefined);
  // Only the good point is a position: the trail and last never hold the others.
  assert.deepEqual(model.trail.map((p) => p.seq), [1, 2]);
  assert.equal(model.last.lat, 48.2);
  assert.equal(model.undecryptable, 3);
  // The point moved from another stream is under a kid this key never opened, after one it did:
  // said once, as a key that changed (the page cannot tell a rekey from a moved value).
  assert.deepEqual(seen.notices, [KEY_NOTICES.rekeyed]);
  phone.close(); contact.close();
});

test('a watcher without the key, or with a damaged one, gets the notice once and no position', async () => {
  const server = new StandIn();
  const [phone, contact] = await pair(server);
  const owner = await phone.startPanic({ status: 'red', lat: 48.1, lon: 11.5, e2e: true });
  await owner.update({ lat: 48.2, lon: 11.6 });
  for (const [fragment, notice] of [['s=x&t=y', KEY_NOTICES.absent], ['s=x&t=y&k=abc', KEY_NOTICES.invalid], [`k=${e2e.encodeKey(new Uint8Array(32))}`, KEY_NOTICES.wrong]]) {
    const model = await WatchModel.open(contact, owner.stream, owner.watchTokens[0], { e2e: fragment });
    const seen = collect(model);
    await model.settled();
    assert.equal(model.notice, notice);
    assert.equal(model.last, null);
    assert.deepEqual(model.trail, []);
    assert.equal(model.points.length, 2);
    assert.ok(model.points.every((p) => !p.ok && p.label === CANNOT_DECRYPT && p.position === undefined));
    // Said once: no new notice for the second point.
    assert.ok(seen.notices.length <= 1);
    model.dispose();
    await model.watch.unwatch();
  }
  phone.close(); contact.close();
});

test('a circle stream: boxes for each member secret held; a member opens its own box, a rekey leaves a revoked member out', async () => {
  const server = new StandIn();
  const [phone, contact] = await pair(server);
  const secrets = new Map([[1, await e2e.newMemberSecret()], [2, await e2e.newMemberSecret()]]);
  const owner = await phone.startPanic({ status: 'red', lat: 52.5, lon: 13.4, e2e: true, memberSecrets: secrets });
  const start = server.frames.find((f) => f.op === 'panic.start');
  assert.equal(start.boxes, undefined);
  assert.deepEqual(start.e2e.boxes.map((b) => b.member), [1, 2]);
  for (const b of start.e2e.boxes) {
    assert.equal(b.box.length, 80);
    assert.deepEqual(await e2e.unwrapForMember(secrets.get(b.member), owner.e2e.kid, b.member, b.box), owner.e2e.key);
  }
  // Member 2 watches with its member token (the stand-in reads the number from it) and its secret.
  const model = await WatchModel.open(contact, owner.stream, { memberToken: 'm:2' }, { e2e: { memberSecret: secrets.get(2), member: 2 } });
  const seen = collect(model);
  await model.settled();
  assert.equal(model.last.lat, 52.5);
  assert.equal(model.notice, null);
  // Member 1's secret does not open member 2's box.
  const wrong = await WatchModel.open(contact, owner.stream, { memberToken: 'm:2' }, { e2e: { memberSecret: secrets.get(1), member: 2 } });
  await wrong.settled();
  assert.equal(wrong.notice, KEY_NOTICES.box);
  assert.equal(wrong.last, null);
  wrong.dispose();

  // Rekey without member 2 (revoked): new kid, a box for member 1 only; member 2 cannot open what follows.
  const model2 = await WatchModel.open(contact, owner.stream, { memberToken: 'm:2' }, { e2e: { memberSecret: secrets.get(2), member: 2 } });
  await model2.settled();
  const before = owner.e2e.kid;
  const next = await owner.rekey({ memberSecrets: new Map([[1, secrets.get(1)]]) });
  assert.notEqual(next.kid, before);
  const rekey = server.frames.find((f) => f.op === 'panic.rekey');
  assert.equal(rekey.kid, next.kid);
  assert.deepEqual(rekey.boxes.map((b) => b.member), [1]);
  await owner.update({ lat: 52.6, lon: 13.5 });
  while (model2.lastSeq < 2) await new Promise((resolve) => model2.once('change', resolve));
  await model2.settled();
  assert.equal(model2.points.at(-1).ok, false);
  assert.equal(model2.last.lat, 52.5);
  assert.equal(model2.notice, KEY_NOTICES.rekeyed);
  void seen;
  phone.close(); contact.close();
});
