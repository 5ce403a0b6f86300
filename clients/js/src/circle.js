// A check-in circle this client listens to (docs/PROTOCOL.md, "Check-in circles"): its state as
// the last open/join reply had it, kept by the circle's news, and the operations of the role the
// credential gives (owner or member). Re-opened (or re-joined) after each reconnect.

import { Emitter } from './emitter.js';

/** `{owner_token}` or `{member_token}` for `{ownerToken}` or `{memberToken}`. */
export function credentialFields(credential) {
  if (typeof credential?.ownerToken === 'string') return { owner_token: credential.ownerToken };
  if (typeof credential?.memberToken === 'string') return { member_token: credential.memberToken };
  throw new TypeError('a circle credential is {ownerToken} or {memberToken}');
}

/**
 * Emits `state` (each open/join reply), `requested`, `answered`, `home`, `panic` (a stream of the
 * circle started, escalated or ended: `checkin.panic`), `revoked`, `closed`, and `change` after
 * each of them; `error` for a failed re-open after a reconnect.
 */
export class Circle extends Emitter {
  constructor(client, id, credential) {
    super();
    this.client = client;
    this.id = id;
    this.credential = credential;
    /** `owner` or `member`. */
    this.role = credential.ownerToken !== undefined ? 'owner' : 'member';
    this.ownerToken = credential.ownerToken ?? null;
    this.memberToken = credential.memberToken ?? null;
    /** The circle's state (docs/PROTOCOL.md "State and news"), kept by its news. */
    this.state = null;
    /** The circle's active panic streams: `{stream, status, started_at, escalated_at?}`. */
    this.panics = [];
    /** False once revoked, closed or left: nothing more arrives. */
    this.active = true;
  }

  get #fields() { return { circle: this.id, ...credentialFields(this.credential) }; }

  async _listen() {
    const op = this.role === 'owner' ? 'checkin.open' : 'checkin.join';
    return this.client._call(op, this.#fields, {
      onReply: (reply) => {
        this.state = reply.state;
        this.panics = [...(reply.state.panics ?? [])];
        this.emit('state', reply.state);
        this.emit('change', this);
      },
    });
  }

  _event(msg) {
    if (!this.active) return;
    const s = this.state;
    switch (msg.type) {
      case 'checkin.requested':
        if (s) {
          const request = { member: msg.member, at: msg.at };
          if (msg.label !== undefined) request.label = msg.label;
          s.requests = [...(s.requests ?? []).filter((r) => r.member !== msg.member), request];
        }
        this.emit('requested', msg);
        break;
      case 'checkin.answered':
        if (s) {
          s.answer = msg.answer;
          s.requests = [];
        }
        this.emit('answered', msg);
        break;
      case 'checkin.home':
        if (s) {
          if (msg.state === 'set') s.home = { at: msg.at, until: msg.until };
          else delete s.home;
        }
        this.emit('home', msg);
        break;
      case 'checkin.panic':
        this.#panic(msg);
        this.emit('panic', msg);
        break;
      case 'checkin.revoked':
      case 'checkin.closed':
        this.active = false;
        this.client._forgetCircle(this);
        this.emit(msg.type.slice('checkin.'.length), msg);
        break;
      default:
        // D, not built yet: `checkin.acked` ({notice, member, label, at}) once vigild has
        // `checkin.ack`; reaches `event` as every other news does.
        break;
    }
    this.emit('event', msg);
    this.emit('change', this);
  }

  #panic(msg) {
    const others = this.panics.filter((p) => p.stream !== msg.stream);
    if (msg.event === 'ended') {
      this.panics = others;
      return;
    }
    const had = this.panics.find((p) => p.stream === msg.stream);
    const panic = { ...(had ?? { stream: msg.stream, started_at: msg.at }), status: msg.status };
    if (msg.event === 'escalated') panic.escalated_at = msg.at;
    this.panics = [...others, panic];
  }

  // MARK: the owner's operations

  /** Mints a member token; resolves with `{member, label, token}` (the token is shown this once). */
  async invite(label) {
    const reply = await this.client.request('checkin.invite', label == null ? this.#fields : { ...this.#fields, label });
    const member = { member: reply.member, label: reply.label ?? null, token: reply.member_token };
    if (this.state?.members) this.state.members = [...this.state.members, { member: reply.member, label: reply.label, added_at: Date.now() }];
    return member;
  }

  async revoke(member) {
    await this.client.request('checkin.revoke', { ...this.#fields, member });
    if (this.state?.members) this.state.members = this.state.members.filter((m) => m.member !== member);
  }

  /** "I am safe" (`{note}` optional); answers every pending request. Resolves with the answer. */
  async answer({ note } = {}) {
    const fields = { ...this.#fields, status: 'safe' };
    if (note) fields.note = note;
    return (await this.client.request('checkin.answer', fields)).answer;
  }

  /** Home safe: `{for_s}`, `{until}` or `{clear: true}`; resolves with the home (null after a clear). */
  async home(spec) {
    return (await this.client.request('checkin.home', { ...this.#fields, ...spec })).home;
  }

  async close() {
    await this.client.request('checkin.close', this.#fields);
    this.active = false;
    this.client._forgetCircle(this);
  }

  /** Starts a panic stream for this circle (owner only): `startPanic` with the circle and its owner token. */
  async startPanic(fields) {
    const owner = await this.client.startPanic({ ...fields, circle: this.id, ownerToken: this.ownerToken });
    owner.circle ??= this.id;
    return owner;
  }

  // MARK: the members' operations

  /** "Are you safe?"; resolves with the request's time. */
  async request() {
    return (await this.client.request('checkin.request', this.#fields)).at;
  }

  /** Watches one of the circle's panic streams with the member token. */
  watch(stream, options = {}) {
    return this.client.watch(stream, { ...options, memberToken: this.memberToken });
  }

  // MARK: both

  /** Stops listening (the circle and the credential stay valid). */
  async leave() {
    this.active = false;
    this.client._forgetCircle(this);
    if (this.client.isOpen) await this.client.request('checkin.leave', { circle: this.id });
  }

  registerPush(subscription) { return this.client.registerPush(this.id, this.credential, subscription); }
  registerRelay(handle) { return this.client.registerRelay(this.id, this.credential, handle); }
  unregister(subscription) { return this.client.unregister(this.id, this.credential, subscription); }
}
