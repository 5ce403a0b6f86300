// VigilClient: one WebSocket to vigild's /v1 (docs/PROTOCOL.md), with request/reply by `ref`,
// per-request timeouts, typed errors, waits on `rate_limited`, and reconnection that restores
// what the application asked for: the map subscription (and its pin set), each watched stream
// (from the last seq delivered), each owned stream (with its owner token) and each check-in
// circle listened to (opened as its owner or joined as a member). Every write carries an
// idempotency key (`idem`) and waits in an outbox while the connection is away, so that a write
// cut off by a lost connection is sent again and applied once (docs/PROTOCOL.md, "Writes that
// are safe to retry").

import { Emitter } from './emitter.js';
import { Circle, credentialFields } from './circle.js';
import { newStreamKey, seal, wrapForMember } from './e2e.js';

/** An error reply from the server, or a failure of the request itself (timeout, disconnected, closed). */
export class VigilError extends Error {
  /**
   * @param {string} code the server's `code` (`invalid_lat`, `rate_limited`, ...) or one of the
   *   client's own: `timeout`, `disconnected`, `closed`, `not_connected`, `outbox_full`; a write's carry its `idem`
   */
  constructor(code, message, { field, retryAfterMs, reply, op, idem } = {}) {
    super(message || code);
    this.name = 'VigilError';
    this.code = code;
    if (field !== undefined) this.field = field;
    if (retryAfterMs !== undefined) this.retryAfterMs = retryAfterMs;
    if (reply !== undefined) this.reply = reply;
    if (op !== undefined) this.op = op;
    if (idem !== undefined) this.idem = idem;
  }
}

/**
 * The operations that change state: each is sent with an `idem` key and goes through the outbox.
 * Reads (subscribe, watch, resume, open, join, leave, unwatch) are not.
 */
export const WRITE_OPS = new Set([
  'pin.create', 'pin.update', 'pin.delete', 'pin.vote',
  'panic.start', 'panic.update', 'panic.status', 'panic.end', 'panic.invite', 'panic.revoke', 'panic.timer', 'panic.rekey',
  'checkin.create', 'checkin.invite', 'checkin.revoke', 'checkin.answer', 'checkin.home', 'checkin.close',
  'checkin.request', 'checkin.register', 'checkin.unregister', 'checkin.ack',
]);

/** A new idempotency key: 128 random bits from the platform's CSPRNG, 22 characters of base64url. */
export function newIdemKey() {
  const bytes = globalThis.crypto.getRandomValues(new Uint8Array(16));
  return btoa(String.fromCharCode(...bytes)).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

/** `fields` with an `idem` key when `op` is a write (the caller's own key is kept). */
const withIdem = (op, fields) => (WRITE_OPS.has(op) && fields.idem === undefined ? { ...fields, idem: newIdemKey() } : fields);

const DEFAULT_RECONNECT = { minDelayMs: 500, maxDelayMs: 15000, factor: 2, jitter: 0.5 };

/** Node's built-in WebSocket when present (Node 22+), else the `ws` package (npm or Debian's node-ws). */
async function loadWebSocket() {
  if (typeof globalThis.WebSocket === 'function') return globalThis.WebSocket;
  const { createRequire } = await import('node:module');
  const require = createRequire(import.meta.url);
  for (const name of ['ws', '/usr/share/nodejs/ws']) {
    try {
      return require(name);
    } catch { /* try the next */ }
  }
  throw new VigilError('no_websocket', 'no WebSocket implementation: use Node 22+, or install ws (npm i ws, or apt-get install node-ws)');
}

/** A catch handler for background work: failures other than a lost or closed connection go to `emitter`'s `error`. */
const reportTo = (emitter) => (err) => { if (err.code !== 'disconnected' && err.code !== 'closed') emitter.emit('error', err); };

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** The fields of a position, sealed (not sent) on an end-to-end encrypted stream. */
const POSITION_FIELDS = ['lat', 'lon', 'accuracy_m', 'heading', 'speed_mps', 'note'];

/** `[[member, secret], …]` from a Map, an array of `{member, secret}` or an object keyed by member number. */
function memberSecretList(memberSecrets) {
  if (memberSecrets == null) return [];
  if (memberSecrets instanceof Map) return [...memberSecrets.entries()].map(([m, s]) => [Number(m), s]);
  if (Array.isArray(memberSecrets)) return memberSecrets.map(({ member, secret }) => [Number(member), secret]);
  return Object.entries(memberSecrets).map(([m, s]) => [Number(m), s]);
}

/** The stream key boxed for each member: `[{member, box}]` in member order (the wire's `boxes`). */
async function memberBoxes(memberSecrets, { key, kid }) {
  const list = memberSecretList(memberSecrets).sort((a, b) => a[0] - b[0]);
  return Promise.all(list.map(async ([member, secret]) => ({ member, box: await wrapForMember(secret, kid, member, key) })));
}

export class VigilClient extends Emitter {
  /**
   * @param {string} url e.g. `ws://127.0.0.1:8080/v1`
   * @param {object} [options] see vigil.d.ts (`VigilClientOptions`)
   */
  constructor(url, options = {}) {
    super();
    this.url = url;
    this.options = options;
    this.requestTimeoutMs = options.requestTimeoutMs ?? 10000;
    this.rateLimitRetries = options.rateLimitRetries ?? 3;
    this.maxOutbox = options.maxOutbox ?? 100;
    this.reconnect = options.reconnect === false ? null : { ...DEFAULT_RECONNECT, ...(options.reconnect || {}) };
    this.random = options.random ?? Math.random;
    /** `idle`, `connecting`, `open` or `closed` (by `close()`). */
    this.state = 'idle';
    this.welcome = null;
    this.connections = 0;
    this.#WebSocket = options.WebSocket ?? null;
  }

  #WebSocket;
  #ws = null;
  #nextRef = 1;
  #pending = new Map();
  /** Writes not answered yet, in the order they were made (sent or waiting for a connection). */
  #outbox = [];
  #openWaiters = new Set();
  #attempt = 0;
  #retryTimer = null;
  #heartbeat = null;
  #lastHeard = 0;
  #probing = false;
  #subscription = null;
  #watches = new Map();
  #owners = new Map();
  #circles = new Map();

  get session() { return this.welcome?.session; }
  get limits() { return this.welcome?.limits; }
  get isOpen() { return this.state === 'open'; }

  /** Opens the connection; resolves with the server's welcome. Reconnects by itself afterwards. */
  async connect() {
    if (this.state === 'open') return this.welcome;
    if (this.state === 'closed') throw new VigilError('closed', 'the client was closed');
    if (this.state === 'idle') {
      this.state = 'connecting';
      const load = this.#WebSocket ? Promise.resolve(this.#WebSocket) : loadWebSocket();
      load.then((impl) => { this.#WebSocket = impl; if (this.state === 'connecting') this.#open(); }, (err) => {
        this.state = 'closed';
        for (const w of this.#openWaiters) { clearTimeout(w.timer); w.reject(err); }
        this.#openWaiters.clear();
      });
    }
    await this.#waitOpen(this.options.connectTimeoutMs ?? null);
    return this.welcome;
  }

  /** Closes for good: no reconnect; pending requests and the outbox's writes fail with `closed`. */
  close() {
    this.state = 'closed';
    clearTimeout(this.#retryTimer);
    clearInterval(this.#heartbeat);
    this.#failPending(new VigilError('closed', 'the client was closed'));
    this.#failOutbox(new VigilError('closed', 'the client was closed'));
    for (const w of this.#openWaiters) w.reject(new VigilError('closed', 'the client was closed'));
    this.#openWaiters.clear();
    if (this.#ws) {
      try { this.#ws.close(1000); } catch { /* already closing */ }
    }
    this.emit('closed');
  }

  /**
   * Drops the current connection, if any, and connects again at once, without waiting for the
   * backoff: for a page told the network is back (`online`), where a dead connection may
   * otherwise go unnoticed for minutes. Requests in flight fail with `disconnected`.
   */
  reconnectNow() {
    if (this.state === 'closed' || this.state === 'idle' || !this.#WebSocket) return;
    clearTimeout(this.#retryTimer);
    this.#attempt = 0;
    const ws = this.#ws;
    if (ws) {
      this.#lost(1000, 'reconnecting');
      try { ws.close(1000); } catch { /* already closing */ }
    }
    this.#open();
  }

  /**
   * Sends `{op, ref, ...fields}` and resolves with the `ok` reply; rejects with a VigilError.
   * Waits for the connection when it is not open (within the timeout). On `rate_limited` it waits
   * the `retry_after_ms` the server gave and tries again, up to `rateLimitRetries` times.
   * A write (`WRITE_OPS`) gets an `idem` key (unless `fields` has one) kept for all its sends, and
   * goes through the outbox: a lost connection does not fail it, it is sent again on reconnect.
   */
  async request(op, fields = {}, { timeoutMs = this.requestTimeoutMs, retryRateLimited = true } = {}) {
    fields = withIdem(op, fields);
    const attempt = () => this.#call(op, fields, { timeoutMs });
    return retryRateLimited ? this.#withRateLimit(op, attempt) : attempt();
  }

  // MARK: the map

  /**
   * Subscribes to an area (`{bbox:[s,w,n,e]}` or `{center:{lat,lon}, radius_m}`), replacing the previous
   * one; resolves with the reply (`pins`, `truncated`). Re-sent after each reconnect; each reply is
   * also emitted as `pins` ({pins, truncated, resubscribed}) before any event that follows it.
   */
  async subscribe(area, { categories } = {}) {
    const fields = categories ? { area, categories } : { area };
    this.#subscription = fields;
    return this.#withRateLimit('subscribe', () => this.#call('subscribe', fields, {
      onReply: (reply) => {
        if (this.#subscription === fields) this.emit('pins', { pins: reply.pins, truncated: !!reply.truncated, resubscribed: false });
      },
    }));
  }

  async unsubscribe() {
    this.#subscription = null;
    return this.request('unsubscribe');
  }

  /** The current subscription's fields (`{area, categories?}`), or null. */
  get subscription() { return this.#subscription; }

  // MARK: panic streams

  /**
   * Watches a stream with a watch token (`watch(stream, token, {since, attach})`), or as a member
   * of the stream's check-in circle (`watch(stream, {memberToken, since, attach})`). Resolves
   * with a Watch once the first reply arrived; the Watch delivers each event exactly once and in
   * order (seq), re-watching after a reconnect or a hole with `since` = the last seq it
   * delivered, or emits `gap` with the current state.
   */
  async watch(stream, credential, options = {}) {
    const defined = (o) => Object.fromEntries(Object.entries(o ?? {}).filter(([, v]) => v !== undefined));
    const opts = typeof credential === 'string' ? { ...defined(options), watchToken: credential } : { ...defined(credential), ...defined(options) };
    const { since, attach } = opts;
    const token = opts.memberToken ?? opts.watchToken;
    if (typeof token !== 'string') throw new TypeError('watch needs a watch token, or {memberToken}');
    const w = new Watch(this, stream, token, since ?? null, opts.memberToken != null ? 'member_token' : 'watch_token');
    this.#watches.set(stream, w);
    // Listeners attached here miss nothing: the reply and the events right behind it may be
    // handled before the promise this returns resolves.
    attach?.(w);
    try {
      await w._sync();
    } catch (err) {
      // The connection went before the reply: the watch is sent again after the reconnect.
      if (err.code === 'disconnected' && this.state !== 'closed') return this.#whenSynced(w);
      if (this.#watches.get(stream) === w) this.#watches.delete(stream);
      throw err;
    }
    return w;
  }

  /** Resolves once `w` has a reply after a reconnect (its `state`); rejects on its `error` or close(). */
  #whenSynced(w) {
    return new Promise((resolve, reject) => {
      const offs = [];
      const done = (fn, value) => { offs.forEach((off) => off()); fn(value); };
      offs.push(w.once('state', () => done(resolve, w)));
      offs.push(w.once('error', (err) => { this._forgetWatch(w); done(reject, err); }));
      offs.push(this.once('closed', () => done(reject, new VigilError('closed', 'the client was closed'))));
    });
  }

  /**
   * Starts a panic stream; resolves with its Owner (keep `ownerToken` to resume after a restart
   * of the app). With `circle` and that circle's `ownerToken`, the stream is the circle's: its
   * members listening hear `checkin.panic` and may watch it with their member tokens.
   */
  async startPanic(fields) {
    const { ownerToken, e2e, memberSecrets, ...rest } = fields;
    let keys = null;
    if (e2e) {
      // End-to-end encrypted: the position (and note) go sealed for seq 1 and the start's
      // status; each member secret held gets a box with the stream key.
      keys = e2e === true ? await newStreamKey() : { key: e2e.key, kid: e2e.kid };
      const position = {};
      for (const f of POSITION_FIELDS) {
        if (rest[f] !== undefined) position[f] = rest[f];
        delete rest[f];
      }
      rest.e2e = { v: 1, kid: keys.kid, sealed: await seal(keys.key, keys.kid, 1, rest.status, position) };
      // A circle's boxes go inside `e2e` (docs/PROTOCOL.md, "Operations").
      const boxes = await memberBoxes(memberSecrets, keys);
      if (boxes.length > 0) rest.e2e.boxes = boxes;
    }
    const wire = withIdem('panic.start', rest);
    if (ownerToken !== undefined) wire.owner_token = ownerToken;
    let owner;
    await this.#withRateLimit('panic.start', () => this.#call('panic.start', wire, {
      onReply: (reply) => {
        owner = this.#adopt(reply.stream, reply.owner_token, { ...reply, status: fields.status }, keys && { ...keys, memberSecrets });
      },
    }));
    return owner;
  }

  /** Becomes the owner of a stream again (after the app restarted); resolves with the Owner. */
  async resumePanic(stream, ownerToken, { e2e, memberSecrets } = {}) {
    const owner = this.#owners.get(stream) ?? new Owner(this, stream, ownerToken, {}, e2e ? { ...e2e, memberSecrets } : null);
    this.#owners.set(stream, owner);
    try {
      await owner._resume();
    } catch (err) {
      this.#owners.delete(stream);
      throw err;
    }
    return owner;
  }

  #adopt(stream, ownerToken, reply, keys = null) {
    const owner = new Owner(this, stream, ownerToken, reply, keys);
    this.#owners.set(stream, owner);
    return owner;
  }

  _forgetWatch(w) { if (this.#watches.get(w.stream) === w) this.#watches.delete(w.stream); }
  _forgetOwner(o) { if (this.#owners.get(o.stream) === o) this.#owners.delete(o.stream); }
  _forgetCircle(c) { if (this.#circles.get(c.id) === c) this.#circles.delete(c.id); }

  // MARK: check-in circles

  /**
   * Creates a circle (`members`: a label or null per member token to mint) and listens to it as
   * its owner; resolves with the Circle, whose `ownerToken` and `memberTokens` are shown only
   * this once (keep them: the invite links are made of them).
   */
  async createCircle(members) {
    const reply = await this.request('checkin.create', members === undefined ? {} : { members });
    const circle = await this.#listen(reply.circle, { ownerToken: reply.owner_token });
    circle.memberTokens = reply.members.map((m) => ({ member: m.member, label: m.label ?? null, token: m.member_token }));
    circle.expiresAt = reply.expires_at;
    return circle;
  }

  /** Listens to a circle as its owner (`checkin.open`); resolves with the Circle and its state. */
  openCircle(circle, ownerToken) { return this.#listen(circle, { ownerToken }); }

  /** Listens to a circle as a member (`checkin.join`); resolves with the Circle and its state. */
  joinCircle(circle, memberToken) { return this.#listen(circle, { memberToken }); }

  async #listen(id, credential) {
    const circle = new Circle(this, id, credential);
    const previous = this.#circles.get(id);
    this.#circles.set(id, circle);
    try {
      await circle._listen();
    } catch (err) {
      if (this.#circles.get(id) === circle) {
        if (previous) this.#circles.set(id, previous);
        else this.#circles.delete(id);
      }
      throw err;
    }
    return circle;
  }

  /**
   * Registers a Web Push subscription for a circle's notices: `credential` is `{ownerToken}` or
   * `{memberToken}`, `subscription` what `PushSubscription.toJSON()` gives (its
   * `expirationTime` is not sent). Resolves with the subscription's id (for `unregister`).
   */
  async registerPush(circle, credential, subscription) {
    const { endpoint, keys } = subscription ?? {};
    const push = { endpoint, keys: { p256dh: keys?.p256dh, auth: keys?.auth } };
    return (await this.request('checkin.register', { circle, ...credentialFields(credential), push })).subscription;
  }

  /** Registers the operator's relay (a native app's `handle`) for a circle's notices; resolves with the subscription's id. */
  async registerRelay(circle, credential, handle) {
    return (await this.request('checkin.register', { circle, ...credentialFields(credential), relay: { handle } })).subscription;
  }

  /**
   * "I have seen it": acknowledges notice `notice` (its id, from the push payload or the page's
   * link) for `credential` (`{memberToken}`, or `{ownerToken}` for a question). The circle hears
   * `checkin.acked`; the holder's other devices stop being told; the escalation ladder stops.
   */
  async ack(circle, credential, notice) {
    await this.request('checkin.ack', { circle, ...credentialFields(credential), notice });
  }

  /** Removes a subscription that `registerPush` or `registerRelay` made. */
  async unregister(circle, credential, subscription) {
    await this.request('checkin.unregister', { circle, ...credentialFields(credential), subscription });
  }

  /** One attempt, with a synchronous `onReply` run before any later message is handled. */
  _call(op, fields, opts) { return this.#call(op, fields, opts); }

  // MARK: internals

  async #withRateLimit(op, attempt) {
    for (let retries = 0; ; retries++) {
      try {
        return await attempt();
      } catch (err) {
        if (!(err instanceof VigilError) || err.code !== 'rate_limited' || retries >= this.rateLimitRetries) throw err;
        const waitMs = Math.max(0, err.retryAfterMs ?? 1000);
        this.emit('rate_limited', { op, retryAfterMs: waitMs });
        await sleep(waitMs);
      }
    }
  }

  async #call(op, fields, { timeoutMs = this.requestTimeoutMs, onReply } = {}) {
    if (WRITE_OPS.has(op)) return this.#write(op, withIdem(op, fields), { timeoutMs, onReply });
    const started = Date.now();
    if (this.state !== 'open') await this.#waitOpen(timeoutMs);
    const left = timeoutMs == null ? null : Math.max(1, timeoutMs - (Date.now() - started));
    return new Promise((resolve, reject) => {
      const ref = this.#nextRef++;
      const entry = { op, resolve, reject, onReply, timer: null };
      if (left != null) {
        entry.timer = setTimeout(() => {
          this.#pending.delete(ref);
          reject(new VigilError('timeout', `${op}: no reply within ${timeoutMs} ms`, { op }));
        }, left);
      }
      this.#pending.set(ref, entry);
      try {
        this.#ws.send(JSON.stringify({ ...fields, op, ref }));
      } catch (err) {
        clearTimeout(entry.timer);
        this.#pending.delete(ref);
        reject(new VigilError('disconnected', `${op}: ${err.message}`, { op }));
      }
    });
  }

  /**
   * A write through the outbox: sent now when the connection is open, else when it opens, and
   * again (same key) on every reconnect until it is answered. It ends in its reply, or fails with
   * `timeout` (its own `timeoutMs` passed: it may or may not have been applied; `err.idem` is its
   * key, for a resend), `outbox_full` (`maxOutbox` writes wait already), `closed` (`close()`) or
   * `disconnected` (the connection was lost with reconnect off).
   */
  #write(op, fields, { timeoutMs, onReply }) {
    const { idem } = fields;
    if (this.state === 'closed') return Promise.reject(new VigilError('closed', 'the client was closed', { op, idem }));
    if (this.state === 'idle') return Promise.reject(new VigilError('not_connected', 'call connect() first', { op, idem }));
    if (this.#outbox.length >= this.maxOutbox) {
      return Promise.reject(new VigilError('outbox_full', `${op}: ${this.maxOutbox} writes wait for an answer already`, { op, idem }));
    }
    return new Promise((resolve, reject) => {
      const entry = { op, fields, idem, resolve, reject, onReply, timer: null, ref: null, write: true };
      if (timeoutMs != null) {
        entry.timer = setTimeout(() => {
          this.#unqueue(entry);
          reject(new VigilError('timeout', `${op}: no reply within ${timeoutMs} ms`, { op, idem }));
        }, timeoutMs);
      }
      this.#outbox.push(entry);
      if (this.state === 'open') this.#sendWrite(entry);
    });
  }

  /** Sends one write of the outbox with a fresh ref; a send that fails waits for the reconnect. */
  #sendWrite(entry) {
    const ref = this.#nextRef++;
    entry.ref = ref;
    this.#pending.set(ref, entry);
    try {
      this.#ws.send(JSON.stringify({ ...entry.fields, op: entry.op, ref }));
    } catch {
      this.#pending.delete(ref);
      entry.ref = null;
    }
  }

  /** Takes a write out of the outbox (answered, timed out or failed). */
  #unqueue(entry) {
    const i = this.#outbox.indexOf(entry);
    if (i >= 0) this.#outbox.splice(i, 1);
    if (entry.ref !== null) this.#pending.delete(entry.ref);
    clearTimeout(entry.timer);
  }

  #failOutbox(err) {
    const entries = this.#outbox;
    this.#outbox = [];
    for (const e of entries) {
      clearTimeout(e.timer);
      if (e.ref !== null) this.#pending.delete(e.ref);
      e.reject(new VigilError(err.code, `${e.op}: ${err.message}`, { op: e.op, idem: e.idem }));
    }
  }

  /** Writes waiting for an answer (sent or not), oldest first. */
  get outboxSize() { return this.#outbox.length; }

  #waitOpen(timeoutMs) {
    if (this.state === 'open') return Promise.resolve();
    if (this.state === 'closed') return Promise.reject(new VigilError('closed', 'the client was closed'));
    if (this.state === 'idle') return Promise.reject(new VigilError('not_connected', 'call connect() first'));
    return new Promise((resolve, reject) => {
      const w = { resolve, reject, timer: null };
      if (timeoutMs != null) {
        w.timer = setTimeout(() => {
          this.#openWaiters.delete(w);
          reject(new VigilError('timeout', `not connected within ${timeoutMs} ms`));
        }, timeoutMs);
      }
      this.#openWaiters.add(w);
    });
  }

  #open() {
    this.state = 'connecting';
    let ws;
    try {
      ws = new this.#WebSocket(this.url, this.options.protocols ?? ['vigil.v1']);
    } catch (err) {
      this.emit('error', err);
      this.#scheduleReconnect();
      return;
    }
    this.#ws = ws;
    // A connection that is not welcomed in time (a network that swallows packets) is given up.
    const attemptMs = this.options.attemptTimeoutMs ?? 10000;
    const giveUp = setTimeout(() => {
      if (this.#ws !== ws || this.state === 'open') return;
      this.#lost(4000, 'no welcome in time');
      try { ws.close(); } catch { /* not open yet */ }
      this.#scheduleReconnect();
    }, attemptMs);
    ws.onmessage = (ev) => {
      if (this.#ws !== ws) return;
      this.#lastHeard = Date.now();
      const text = typeof ev.data === 'string' ? ev.data : String(ev.data);
      let msg;
      try {
        msg = JSON.parse(text);
      } catch {
        this.emit('error', new VigilError('bad_json', 'the server sent a message that is not JSON'));
        return;
      }
      if (msg.type === 'welcome') clearTimeout(giveUp);
      this.#dispatch(msg);
    };
    const ended = (code, reason) => {
      clearTimeout(giveUp);
      if (this.#ws !== ws) return;  // this attempt was over already (a `close` after the `error` below)
      this.#lost(code, reason);
      this.#scheduleReconnect();
    };
    let opened = false;
    ws.onopen = () => { opened = true; };
    ws.onclose = (ev) => ended(ev.code, ev.reason);
    // An `error` before the socket opened ends the attempt here: some runtimes fire no `close`
    // after it (Node 20's built-in WebSocket on a refused connection), and waiting for one would
    // hold the retry until the attempt timeout. After the socket opened, `close` follows `error`.
    ws.onerror = () => {
      if (opened || this.#ws !== ws) return;
      ended(1006, 'connection failed');
      try { ws.close(); } catch { /* not open */ }
    };
  }

  /**
   * With `heartbeatMs`: after that long without a message from the server, a harmless request
   * (`panic.unwatch` of no stream, answered `ok`) checks the connection; no answer within
   * `heartbeatTimeoutMs` (10 s) means a connection that died without a word (a phone that
   * changed networks), and the client reconnects at once (event `stalled`).
   */
  #startHeartbeat() {
    clearInterval(this.#heartbeat);
    const every = this.options.heartbeatMs ?? 0;
    if (!every) return;
    this.#lastHeard = Date.now();
    this.#probing = false;
    const ws = this.#ws;
    this.#heartbeat = setInterval(() => {
      if (this.#ws !== ws || this.#probing || Date.now() - this.#lastHeard < every) return;
      this.#probing = true;
      this.#call('panic.unwatch', { stream: '-' }, { timeoutMs: this.options.heartbeatTimeoutMs ?? 10000 }).then(
        () => { this.#probing = false; },
        (err) => {
          this.#probing = false;
          if (err.code !== 'timeout' || this.#ws !== ws) return;
          this.emit('stalled', { silentMs: Date.now() - this.#lastHeard });
          this.reconnectNow();
        },
      );
    }, Math.max(50, Math.floor(every / 2)));
  }

  /** The current connection is gone (or dropped on purpose): pending requests fail. */
  #lost(code, reason) {
    this.#ws = null;
    clearInterval(this.#heartbeat);
    const wasOpen = this.state === 'open';
    if (this.state !== 'closed') this.state = 'connecting';
    this.#failPending(new VigilError('disconnected', `connection closed (${code})`));
    if (wasOpen) this.emit('disconnected', { code, reason });
  }

  #scheduleReconnect() {
    if (this.state === 'closed') return;
    if (!this.reconnect) {
      this.state = 'closed';
      for (const w of this.#openWaiters) { clearTimeout(w.timer); w.reject(new VigilError('disconnected', 'connection lost and reconnect is off')); }
      this.#openWaiters.clear();
      this.#failOutbox(new VigilError('disconnected', 'connection lost and reconnect is off'));
      this.emit('closed');
      return;
    }
    const r = this.reconnect;
    const base = Math.min(r.maxDelayMs, r.minDelayMs * r.factor ** this.#attempt);
    const delayMs = Math.round(base * (1 - r.jitter * this.random()));
    this.#attempt++;
    this.emit('reconnecting', { attempt: this.#attempt, delayMs });
    this.#retryTimer = setTimeout(() => { if (this.state !== 'closed') this.#open(); }, delayMs);
  }

  /** Fails the requests in flight; the outbox's writes are not failed here: they wait to be resent. */
  #failPending(err) {
    const pending = [...this.#pending.values()];
    this.#pending.clear();
    for (const p of pending) {
      if (p.write) { p.ref = null; continue; }
      clearTimeout(p.timer);
      p.reject(new VigilError(err.code, `${p.op}: ${err.message}`, { op: p.op }));
    }
  }

  #dispatch(msg) {
    if (msg.type === 'welcome') {
      this.welcome = msg;
      this.state = 'open';
      this.#attempt = 0;
      this.connections++;
      const reconnected = this.connections > 1;
      for (const w of this.#openWaiters) { clearTimeout(w.timer); w.resolve(); }
      this.#openWaiters.clear();
      this.#startHeartbeat();
      // The outbox first, in order, with the keys they had: writes made offline, and those whose
      // answer the lost connection took.
      for (const e of this.#outbox) if (e.ref === null) this.#sendWrite(e);
      this.emit('open', { welcome: msg, reconnected });
      if (reconnected) this.#restore();
      return;
    }
    if ((msg.type === 'ok' || msg.type === 'error') && msg.ref !== undefined) {
      const p = this.#pending.get(msg.ref);
      if (!p) return;
      this.#pending.delete(msg.ref);
      clearTimeout(p.timer);
      if (p.write) this.#unqueue(p);
      if (msg.type === 'ok') {
        if (p.onReply) {
          try { p.onReply(msg); } catch (err) { this.emit('error', err); }
        }
        p.resolve(msg);
      } else {
        p.reject(new VigilError(msg.code, msg.message, { field: msg.field, retryAfterMs: msg.retry_after_ms, reply: msg, op: p.op, idem: p.idem }));
      }
      return;
    }
    if (msg.type === 'error') {
      this.emit('error', new VigilError(msg.code, msg.message, { field: msg.field, reply: msg }));
      return;
    }
    if (typeof msg.type !== 'string') return;
    if (msg.type.startsWith('checkin.') && typeof msg.circle === 'string') this.#circles.get(msg.circle)?._event(msg);
    if (msg.type.startsWith('panic.') && typeof msg.stream === 'string') {
      if (msg.type === 'panic.watchers') this.#owners.get(msg.stream)?._event(msg);
      else {
        // A missed check-in goes to the owner's connection too (once, even if it also watches).
        if (msg.reason === 'missed_check_in') this.#owners.get(msg.stream)?._event(msg);
        this.#watches.get(msg.stream)?._event(msg);
      }
    }
    this.emit('event', msg);
    this.emit(msg.type, msg);
  }

  /**
   * After a reconnect: owners resume, the subscription is re-sent, each watch re-watches from its
   * last seq, each circle is opened or joined again (its new state says what was missed).
   */
  #restore() {
    for (const circle of [...this.#circles.values()]) {
      circle._listen().catch((err) => {
        // Withdrawn or closed while the connection was away: nothing to listen to any more.
        if (err.code === 'forbidden') {
          circle.active = false;
          this._forgetCircle(circle);
        }
        reportTo(circle)(err);
      });
    }
    for (const owner of [...this.#owners.values()]) {
      owner._resume().catch(reportTo(owner));
    }
    const sub = this.#subscription;
    if (sub) {
      this.#withRateLimit('subscribe', () => this.#call('subscribe', sub, {
        onReply: (reply) => {
          if (this.#subscription === sub) this.emit('pins', { pins: reply.pins, truncated: !!reply.truncated, resubscribed: true });
        },
      })).catch(reportTo(this));
    }
    for (const w of [...this.#watches.values()]) {
      w._sync().catch(reportTo(w));
    }
    this.emit('reconnected', { welcome: this.welcome });
  }
}

/**
 * One watched stream. Emits `state` ({state, gap}) on each (re-)watch reply, then each event with a
 * seq once, in order: `location`, `status`, `ended` (and `event` for all); `stale`, `revoked`;
 * `gap` ({state, lastSeq}) when events were missed and the server no longer holds them.
 */
export class Watch extends Emitter {
  constructor(client, stream, token, since, credential = 'watch_token') {
    super();
    this.client = client;
    this.stream = stream;
    this.token = token;
    /** `watch_token`, or `member_token` for a member of the stream's circle. */
    this.credential = credential;
    /** The seq of the last event delivered (0 before any). */
    this.lastSeq = since ?? 0;
    this.state = null;
    this.active = true;
    this.#first = since == null;
    this.#syncing = false;
  }

  #first;
  #syncing;

  /** (Re-)watches from `lastSeq` (or for the first time, without since). */
  _sync() {
    this.#syncing = true;
    const fields = { stream: this.stream, [this.credential]: this.token };
    if (!this.#first) fields.since = this.lastSeq;
    return this.client._call('panic.watch', fields, {
      onReply: (reply) => {
        this.#syncing = false;
        const state = reply.state;
        this.state = state;
        const gap = !!reply.gap;
        if (this.#first || gap) {
          const previous = this.lastSeq;
          this.lastSeq = state.seq;
          this.#first = false;
          if (gap) this.emit('gap', { state, lastSeq: previous });
        }
        this.emit('state', { state, gap, reply });
      },
    });
  }

  _event(msg) {
    if (!this.active) return;
    if (typeof msg.seq !== 'number') {
      if (msg.type === 'panic.stale') this.emit('stale', msg);
      else if (msg.type === 'panic.revoked') { this.active = false; this.client._forgetWatch(this); this.emit('revoked', msg); }
      this.emit('event', msg);
      return;
    }
    if (this.#syncing || msg.seq <= this.lastSeq) return;  // replayed after the pending reply, or a duplicate
    if (msg.seq > this.lastSeq + 1) {
      // A hole (a conflated backlog): ask the server for what is missing, from the last seq delivered.
      this._sync().catch(reportTo(this));
      return;
    }
    this.lastSeq = msg.seq;
    // An ended stream sends nothing more: it is not watched again after a reconnect.
    if (msg.type === 'panic.ended') this.client._forgetWatch(this);
    const name = msg.type.slice('panic.'.length);
    this.emit(name, msg);
    this.emit('event', msg);
  }

  /** Stops watching. */
  async unwatch() {
    this.active = false;
    this.client._forgetWatch(this);
    if (this.client.isOpen) await this.client.request('panic.unwatch', { stream: this.stream });
  }
}

/** A stream this client owns: send locations and status, end it, invite and revoke contacts. */
export class Owner extends Emitter {
  constructor(client, stream, ownerToken, reply, keys = null) {
    super();
    /**
     * An end-to-end encrypted stream's current `{key, kid}` (the key to hand the direct contacts,
     * e.g. in the watch link's `k=`), or null for a clear stream.
     */
    this.e2e = keys ? { key: keys.key, kid: keys.kid } : null;
    /** The circle members' secrets the boxes are made from (kept for rekey). */
    this.memberSecrets = keys?.memberSecrets ?? null;
    /** How many times a sealed update is sealed again after `seq_mismatch` before it fails. */
    this.maxReseals = 5;
    this.client = client;
    this.stream = stream;
    this.ownerToken = ownerToken;
    this.watchTokens = reply.watch_tokens ?? [];
    /** The check-in circle the stream was started for (its members follow it), or null. */
    this.circle = reply.circle ?? null;
    this.seq = reply.seq ?? 0;
    this.watchers = 0;
    this.ended = false;
    /** `red` or `amber`: as started, changed by status(), or as the server had it on resume. */
    this.status = reply.status ?? null;
    /** The safety timer's deadline (ms) as the server keeps it, or null. */
    this.dueAt = reply.due_at ?? null;
    /** `{reason, at, sent_at}` once the server raised the alarm for a missed check-in, else null. */
    this.escalated = null;
  }

  _event(msg) {
    if (msg.reason === 'missed_check_in') {
      this.status = 'red';
      this.dueAt = null;
      this.escalated = { reason: msg.reason, at: msg.at, sent_at: msg.sent_at };
      if (msg.seq > this.seq) this.seq = msg.seq;
      this.emit('missedCheckIn', msg);
      return;
    }
    if (msg.type === 'panic.watchers') {
      this.watchers = msg.count;
      this.emit('watchers', msg.count);
    }
  }

  async _resume() {
    const reply = await this.client._call('panic.resume', { stream: this.stream, owner_token: this.ownerToken });
    this.seq = reply.state.seq;
    this.status = reply.state.status;
    this.dueAt = reply.state.timer?.due_at ?? null;
    this.escalated = reply.state.escalated ?? null;
    if (reply.state.ended) this.ended = true;
    this.emit('resumed', reply.state);
    return reply;
  }

  // The owner token goes with every request, so a request sent before the resume after a
  // reconnect is still the owner's.
  async #steer(op, fields, opts) {
    const reply = await this.client.request(op, { ...fields, stream: this.stream, owner_token: this.ownerToken }, opts);
    if (typeof reply.seq === 'number') this.seq = reply.seq;
    return reply;
  }

  /**
   * `{lat, lon, accuracy_m?, heading?, speed_mps?}` (and `note?` on an e2e stream); resolves with
   * the new seq. On an end-to-end encrypted stream the position is sealed for the seq the owner
   * expects (its seq + 1) and its status; when the server answers `seq_mismatch` (an event the
   * server made, a status change meanwhile) it is sealed again for the server's `current_seq` + 1
   * and `status` and sent again, at most `maxReseals` times.
   */
  async update(position, opts) {
    if (this.e2e === null) return (await this.#steer('panic.update', position, opts)).seq;
    for (let reseals = 0; ; reseals++) {
      const { key, kid } = this.e2e;
      const seq = this.seq + 1;
      const status = this.status;
      const sealed = await seal(key, kid, seq, status, position);
      try {
        return (await this.#steer('panic.update', { sealed, kid, seq, status }, opts)).seq;
      } catch (err) {
        const reply = err.reply;
        if (err.code !== 'seq_mismatch' || reseals >= this.maxReseals || typeof reply?.current_seq !== 'number') throw err;
        this.seq = reply.current_seq;
        if (reply.status === 'red' || reply.status === 'amber') this.status = reply.status;
        this.emit('resealed', { seq: this.seq + 1, status: this.status });
      }
    }
  }

  /**
   * Replaces an e2e stream's key and kid (`panic.rekey`), with new boxes for `memberSecrets`
   * (default: the ones it holds; leave a revoked member out). Resolves with the new `{key, kid}`:
   * hand the key to the direct contacts that keep watching.
   */
  async rekey({ memberSecrets = this.memberSecrets } = {}, opts) {
    if (this.e2e === null) throw new TypeError('rekey is for an end-to-end encrypted stream');
    const next = await newStreamKey();
    const fields = { kid: next.kid };
    const boxes = await memberBoxes(memberSecrets, next);
    if (this.circle !== null || boxes.length > 0) fields.boxes = boxes;
    await this.#steer('panic.rekey', fields, opts);
    this.e2e = next;
    this.memberSecrets = memberSecrets;
    this.emit('rekeyed', next);
    return next;
  }
  async setStatus(status, opts) {
    const seq = (await this.#steer('panic.status', { status }, opts)).seq;
    this.status = status;
    return seq;
  }
  /** Sets or moves the safety timer: `{due_in_s}` or `{due_at}`; resolves with the deadline the server keeps. */
  async setTimer(timer, opts) {
    this.dueAt = (await this.#steer('panic.timer', timer, opts)).due_at;
    return this.dueAt;
  }
  async cancelTimer(opts) {
    await this.#steer('panic.timer', { cancel: true }, opts);
    this.dueAt = null;
  }
  async end(reason = 'safe', opts) {
    const reply = await this.#steer('panic.end', { reason }, opts);
    this.ended = true;
    this.client._forgetOwner(this);
    return reply.seq;
  }
  async invite(opts) {
    const token = (await this.#steer('panic.invite', {}, opts)).watch_token;
    this.watchTokens.push(token);
    return token;
  }
  async revoke(watchToken, opts) {
    await this.#steer('panic.revoke', { watch_token: watchToken }, opts);
    this.watchTokens = this.watchTokens.filter((t) => t !== watchToken);
  }
}
