// The state the seed apps draw: the pins of the subscribed area, and one watched stream.

import { Emitter } from './emitter.js';

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

/**
 * What a watcher shows: last position, trail, status, stale, ended, revoked. Follows a Watch
 * (VigilClient.watch); emits `change` after each event.
 */
export class WatchModel extends Emitter {
  constructor(watch, { maxTrail = 2000 } = {}) {
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
    if (watch.state) this.#state(watch.state);
    this.#offs = [
      // A reply followed by a replay (since given, no gap): the trail takes the points up to
      // `since` from the state, the rest comes with the replay (else each would be there twice).
      watch.on('state', ({ state, gap }) => { if (gap) this.gaps++; if (gap || this.lastSeq === 0) this.#state(state, watch.lastSeq); }),
      watch.on('location', (m) => {
        const point = { seq: m.seq, lat: m.lat, lon: m.lon, accuracy_m: m.accuracy_m, at: m.at };
        this.trail.push(point);
        if (this.trail.length > this.maxTrail) this.trail.splice(0, this.trail.length - this.maxTrail);
        this.last = { lat: m.lat, lon: m.lon, accuracy_m: m.accuracy_m, heading: m.heading, speed_mps: m.speed_mps, at: m.at };
        this.stale = false;
        this.#changed(m.seq);
      }),
      watch.on('status', (m) => {
        this.status = m.status;
        if (m.reason === 'missed_check_in') {
          this.escalated = { reason: m.reason, at: m.at, sent_at: m.sent_at };
          this.dueAt = null;
          this.last = m.last;
        }
        this.#changed(m.seq);
      }),
      watch.on('timer', (m) => { this.dueAt = m.due_at; this.#changed(m.seq); }),
      watch.on('ended', (m) => { this.ended = { reason: m.reason, at: m.at }; this.dueAt = null; this.#changed(m.seq); }),
      watch.on('stale', () => { this.stale = true; this.emit('change', this); }),
      watch.on('revoked', () => { this.revoked = true; this.emit('change', this); }),
    ];
  }

  #offs;

  /**
   * Watches a stream with a model attached from the start (nothing that follows the reply is
   * missed): with a watch token, or `{memberToken}` for a member of the stream's circle.
   */
  static async open(client, stream, credential, { since, maxTrail } = {}) {
    let model;
    await client.watch(stream, credential, { since, attach: (w) => { model = new WatchModel(w, { maxTrail }); } });
    return model;
  }

  #state(state, through = state.seq) {
    this.status = state.status;
    this.note = state.note ?? null;
    this.last = state.last ?? null;
    this.trail = (state.trail ?? []).filter((p) => p.seq <= through).slice(-this.maxTrail);
    this.ended = state.ended ?? null;
    this.dueAt = state.timer?.due_at ?? null;
    this.escalated = state.escalated ?? null;
    this.lastSeq = through;  // a replay still to come brings the model up to state.seq
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
