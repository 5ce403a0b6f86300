// The state the seed apps draw: the pins of the subscribed area, and one watched stream.

import { Emitter } from './emitter.js';
import { E2EWatchView, CANNOT_DECRYPT } from './e2ewatch.js';

function samePin(a, b) {
  return a.updated_at === b.updated_at && a.up === b.up && a.down === b.down && a.expires_at === b.expires_at;
}

/**
 * The current pin set of a client's subscription, kept by the subscribe replies (full snapshots:
 * after a reconnect, pins that vanished meanwhile are reported removed with reason `reconciled`)
 * and by the pin events. Emits `added` (pin), `updated` (pin), `removed` ({pin, reason}) and
 * `change` after each batch.
 */
export class MapModel extends Emitter {
  constructor(client) {
    super();
    this.client = client;
    /** @type {Map<string, object>} id -> pin */
    this.pins = new Map();
    this.truncated = false;
    this.#offs = [
      client.on('pins', ({ pins, truncated }) => this.reconcile(pins, truncated)),
      client.on('pin.added', (m) => this.#put(m.pin)),
      client.on('pin.updated', (m) => this.#put(m.pin)),
      client.on('pin.removed', (m) => this.#remove(m.pin, m.reason)),
      client.on('pin.expired', (m) => this.#remove(m.pin, 'expired')),
    ];
  }

  #offs;

  /** Replaces the set by a subscribe reply, reporting the differences. */
  reconcile(pins, truncated = false) {
    this.truncated = truncated;
    const next = new Map(pins.map((p) => [p.id, p]));
    for (const [id, pin] of this.pins) {
      if (!next.has(id)) {
        this.pins.delete(id);
        this.emit('removed', { pin, reason: 'reconciled' });
      }
    }
    for (const [id, pin] of next) {
      const old = this.pins.get(id);
      this.pins.set(id, pin);
      if (!old) this.emit('added', pin);
      else if (!samePin(old, pin)) this.emit('updated', pin);
    }
    this.emit('change', this);
  }

  #put(pin) {
    const had = this.pins.has(pin.id);
    this.pins.set(pin.id, pin);
    this.emit(had ? 'updated' : 'added', pin);
    this.emit('change', this);
  }

  #remove(pin, reason) {
    if (!this.pins.delete(pin.id)) return;
    this.emit('removed', { pin, reason });
    this.emit('change', this);
  }

  /** Milliseconds before the pin expires (never below 0). */
  static timeLeftMs(pin, now = Date.now()) {
    return Math.max(0, pin.expires_at - now);
  }

  /** Stops following the client. */
  dispose() {
    for (const off of this.#offs) off();
  }
}

/** Whether a point (a `panic.location`, a trail entry, an escalation's `last`) is sealed. */
const isSealed = (p) => p != null && typeof p.sealed === 'string';

/**
 * What a watcher shows: last position, trail, status, stale, ended, revoked. Follows a Watch
 * (VigilClient.watch); emits `change` after each event.
 *
 * An end-to-end encrypted stream's points are opened with the key of the `e2e` option (the
 * page's fragment, `{key}`, `{memberSecret, member}`, or an E2EWatchView); without one, none
 * opens. Each point is reported once as `point` ({seq, at, ok: true, position} or {seq, at, ok:
 * false, label: 'cannot decrypt this update'}); only opened points reach `last` and `trail`, and
 * `notice` holds the one sentence about a missing or wrong key (`notice` is emitted when it
 * changes). Points open in order; `settled()` resolves once every event so far is handled.
 */
export class WatchModel extends Emitter {
  constructor(watch, { maxTrail = 2000, e2e } = {}) {
    // Attach before the watch's first reply (WatchModel.open, or watch()'s `attach`) to see every event.
    super();
    this.watch = watch;
    this.maxTrail = maxTrail;
    this.status = null;
    this.note = null;
    this.last = null;
    this.trail = [];
    this.stale = false;
    this.ended = null;
    this.revoked = false;
    /** The safety timer's deadline (ms), or null; `escalated` once the server raised the alarm for a missed check-in. */
    this.dueAt = null;
    this.escalated = null;
    this.gaps = 0;
    this.lastSeq = 0;
    /** True for an end-to-end encrypted stream (its state says `e2e`, or a point came sealed). */
    this.e2e = false;
    /** Every point of an e2e stream in seq order, opened or not: `{seq, at, ok, position?, label?}`. */
    this.points = [];
    /** The points that did not open. */
    this.undecryptable = 0;
    this.view = e2e instanceof E2EWatchView ? e2e : new E2EWatchView(e2e ?? '');
    this.notice = null;
    if (watch.state) this.#run(this.#stateNeedsOpening(watch.state), () => this.#state(watch.state, watch.state.seq, null));
    this.#offs = [
      // A reply followed by a replay (since given, no gap): the trail takes the points up to
      // `since` from the state, the rest comes with the replay (else each would be there twice).
      watch.on('state', ({ state, gap, reply }) => {
        if (gap) this.gaps++;
        const fresh = gap || this.lastSeq === 0;
        const through = watch.lastSeq;
        this.#run(this.#stateNeedsOpening(state) || reply?.box !== undefined || state?.box !== undefined,
          () => this.#stateReply(state, fresh, through, reply));
      }),
      watch.on('location', (m) => this.#run(isSealed(m), () => this.#location(m))),
      watch.on('status', (m) => this.#run(isSealed(m.last), () => this.#status(m))),
      watch.on('timer', (m) => this.#run(false, () => { this.dueAt = m.due_at; this.#changed(m.seq); })),
      watch.on('ended', (m) => this.#run(false, () => { this.ended = { reason: m.reason, at: m.at }; this.dueAt = null; this.#changed(m.seq); })),
      watch.on('stale', () => this.#run(false, () => { this.stale = true; this.emit('change', this); })),
      watch.on('revoked', () => this.#run(false, () => { this.revoked = true; this.emit('change', this); })),
      // A rekey: a member gets its new box with it.
      watch.on('event', (m) => {
        if (m.type === 'panic.rekeyed' || m.type === 'panic.rekey') this.#run(true, () => this.#rekey(m));
      }),
    ];
  }

  #offs;
  #work = Promise.resolve();
  #busy = 0;

  /**
   * Runs `fn` now when it opens nothing and nothing is being opened, else after the work before
   * it: events are applied in the order they came, and a clear stream's model changes at once.
   */
  #run(async_, fn) {
    if (!async_ && this.#busy === 0) {
      fn();
      return;
    }
    this.#busy++;
    this.#work = this.#work.then(fn).catch((err) => this.emit('error', err)).finally(() => { this.#busy--; });
  }

  /** Resolves once every event received so far is applied (its points opened or refused). */
  settled() { return this.#work; }

  #stateNeedsOpening(state) {
    return !!state && (state.e2e === true || isSealed(state.last) || (state.trail ?? []).some(isSealed));
  }

  /**
   * Watches a stream with a model attached from the start (nothing that follows the reply is
   * missed): with a watch token, or `{memberToken}` for a member of the stream's circle. `e2e`
   * as for the constructor.
   */
  static async open(client, stream, credential, { since, maxTrail, e2e } = {}) {
    let model;
    await client.watch(stream, credential, { since, attach: (w) => { model = new WatchModel(w, { maxTrail, e2e }); } });
    return model;
  }

  async #stateReply(state, fresh, through, reply) {
    const box = reply?.box ?? state?.box;
    if (box !== undefined) {
      const kids = [state.kid, state.e2e?.kid, state.last?.kid, ...(state.trail ?? []).map((p) => p.kid).reverse()];
      await this.view.box(box, kids);
      this.#noticeFrom();
    }
    if (fresh) await this.#state(state, through);
  }

  async #rekey(m) {
    if (m.box !== undefined) {
      await this.view.box(m.box, [m.kid]);
      this.#noticeFrom();
    }
    this.emit('change', this);
  }

  /** A sealed point opened, or refused: `{seq, at, ok, position?, label?}`; never a position for one that did not open. */
  async #open(p, seq = p.seq) {
    const result = await this.view.point({ sealed: p.sealed, kid: p.kid, seq, status: p.status });
    this.#noticeFrom();
    const point = result.ok ? { seq, at: p.at, ok: true, position: result.position } : { seq, at: p.at, ok: false, label: result.label };
    if (!result.ok) this.undecryptable++;
    return point;
  }

  #noticeFrom() {
    if (this.notice === this.view.notice) return;
    this.notice = this.view.notice;
    this.emit('notice', this.notice);
  }

  #pushPoint(point) {
    this.points.push(point);
    if (this.points.length > this.maxTrail) this.points.splice(0, this.points.length - this.maxTrail);
    this.emit('point', point);
  }

  async #location(m) {
    let position = m;
    if (isSealed(m)) {
      this.e2e = true;
      const point = await this.#open(m);
      this.#pushPoint(point);
      if (!point.ok) { this.#changed(m.seq); return; }
      position = point.position;
    }
    this.trail.push({ seq: m.seq, lat: position.lat, lon: position.lon, accuracy_m: position.accuracy_m, at: m.at });
    if (this.trail.length > this.maxTrail) this.trail.splice(0, this.trail.length - this.maxTrail);
    this.last = { lat: position.lat, lon: position.lon, accuracy_m: position.accuracy_m, heading: position.heading, speed_mps: position.speed_mps, at: m.at };
    if (isSealed(m) && position.note != null) this.note = position.note;
    this.stale = false;
    this.#changed(m.seq);
  }

  async #status(m) {
    this.status = m.status;
    if (m.reason === 'missed_check_in') {
      this.escalated = { reason: m.reason, at: m.at, sent_at: m.sent_at };
      this.dueAt = null;
      if (isSealed(m.last)) {
        // The server cannot know the position (`position_known: false`): the sealed last point
        // is opened here, or shown as not opened; never taken for a position otherwise.
        const point = await this.#open(m.last);
        if (point.ok) this.last = { ...point.position, at: m.last.at };
      } else {
        this.last = m.last ?? null;
      }
    }
    this.#changed(m.seq);
  }

  async #state(state, through = state.seq) {
    this.status = state.status;
    this.ended = state.ended ?? null;
    this.dueAt = state.timer?.due_at ?? null;
    this.escalated = state.escalated ?? null;
    this.lastSeq = through;  // a replay still to come brings the model up to state.seq
    const trail = (state.trail ?? []).filter((p) => p.seq <= through).slice(-this.maxTrail);
    if (this.#stateNeedsOpening(state)) {
      this.e2e = true;
      this.note = null;
      this.points = [];
      this.trail = [];
      this.last = null;
      for (const p of trail) {
        const point = isSealed(p) ? await this.#open(p) : { seq: p.seq, at: p.at, ok: false, label: CANNOT_DECRYPT };
        this.#pushPoint(point);
        if (point.ok) {
          this.trail.push({ seq: p.seq, lat: point.position.lat, lon: point.position.lon, accuracy_m: point.position.accuracy_m, at: p.at });
          this.last = { ...point.position, at: p.at };
          if (point.position.note != null) this.note = point.position.note;
        }
      }
      // The state's last point may be newer than the trail kept: open it too (once).
      const last = state.last;
      if (isSealed(last) && last.seq !== undefined && last.seq <= through && !trail.some((p) => p.seq === last.seq)) {
        const point = await this.#open(last);
        this.#pushPoint(point);
        if (point.ok) this.last = { ...point.position, at: last.at };
      }
    } else {
      this.note = state.note ?? null;
      this.last = state.last ?? null;
      this.trail = trail;
    }
    this.emit('change', this);
  }

  #changed(seq) {
    this.lastSeq = seq;
    this.emit('change', this);
  }

  /** The time of the last location (ms), or null. */
  get lastUpdateAt() { return this.last?.at ?? null; }

  dispose() {
    for (const off of this.#offs) off();
  }
}
