// Type declarations for vigil-client (src/index.js). The wire format is docs/PROTOCOL.md.

export type Area =
  | { bbox: [south: number, west: number, north: number, east: number] }
  | { center: { lat: number; lon: number }; radius_m: number };

export interface Pin {
  id: string;
  lat: number;
  lon: number;
  title: string;
  description: string;
  category: string;
  created_at: number;
  updated_at: number;
  expires_at: number;
  up: number;
  down: number;
}

/**
 * The welcome's `limits`. Texts are capped in characters (`*_max_chars`, grapheme clusters) and
 * in bytes of UTF-8 (`*_max_bytes`), both after trimming surrounding white space.
 */
export interface Limits {
  max_message_bytes: number;
  title_max_chars: number;
  title_max_bytes: number;
  description_max_chars: number;
  description_max_bytes: number;
  categories: string[];
  ttl_s: { default: number; min: number; max: number };
  vote_flag_threshold: number;
  writes_per_minute: number;
  write_burst: number;
  messages_per_second: number;
  message_burst: number;
  max_subscribe_pins: number;
  max_range_m: number;
  /** A panic stream's `note`. */
  panic_note_max_chars: number;
  panic_note_max_bytes: number;
  /** A check-in member's label. */
  checkin_label_max_chars: number;
  checkin_label_max_bytes: number;
  /** The note of a check-in answer. */
  checkin_note_max_chars: number;
  checkin_note_max_bytes: number;
}

export interface Welcome { type: 'welcome'; session: string; protocol: number; limits: Limits }

export interface TrailPoint { seq: number; lat: number; lon: number; accuracy_m?: number; at: number }

export interface StreamState {
  stream: string;
  status: 'red' | 'amber';
  started_at: number;
  updated_at: number;
  seq: number;
  note?: string;
  last?: { lat: number; lon: number; accuracy_m?: number; at: number };
  trail: TrailPoint[];
  ended?: { reason: 'safe' | 'cancelled' | 'abandoned'; at: number };
  /** While a safety timer is set. */
  timer?: { due_at: number };
  /** Once the timer passed with no check-in. */
  escalated?: Escalation;
}

/**
 * The server raised the alarm for a missed check-in: `at` is the deadline (or the stream's last
 * event, if that came later), `sent_at` when the alarm went out (at or after `at`; later after a
 * server restart), so `sent_at - at` is how late it was.
 */
export interface Escalation { reason: 'missed_check_in'; at: number; sent_at: number }

export interface Position { lat: number; lon: number; accuracy_m?: number; heading?: number; speed_mps?: number }

export interface PanicLocation extends Position { type: 'panic.location'; stream: string; seq: number; at: number }
/** A status change; one the server made for a missed check-in also has `reason`, `due_at`, `last` and `sent_at` (see Escalation). */
export interface PanicStatus {
  type: 'panic.status'; stream: string; seq: number; status: 'red' | 'amber'; at: number;
  reason?: 'missed_check_in'; due_at?: number; last?: Position & { at: number }; sent_at?: number;
}
export interface PanicEnded { type: 'panic.ended'; stream: string; seq: number; reason: 'safe' | 'cancelled' | 'abandoned'; at: number }
export interface PanicStale { type: 'panic.stale'; stream: string; last_location_at: number; at: number }
export interface PanicRevoked { type: 'panic.revoked'; stream: string }
export type PanicEvent = PanicLocation | PanicStatus | PanicEnded | PanicStale | PanicRevoked;

// MARK: check-in circles (docs/PROTOCOL.md "Check-in circles")

/** Who holds a circle's capability: its owner, or one of its members. */
export type CircleCredential = { ownerToken: string } | { memberToken: string };

export interface CircleMember { member: number; label?: string; added_at: number }
export interface CheckinRequest { member: number; label?: string; at: number }
export interface CheckinAnswer { status: 'safe'; at: number; note?: string; answered: CheckinRequest[] }
export interface CheckinHome { at: number; until: number }
/** An active panic stream of the circle (its members may watch it with their member tokens). */
export interface CirclePanic { stream: string; status: 'red' | 'amber'; started_at: number; escalated_at?: number }

export interface CircleState {
  circle: string;
  created_at: number;
  active_at: number;
  expires_at: number;
  role: 'owner' | 'member';
  /** The owner's state only. */
  members?: CircleMember[];
  /** A member's state only. */
  you?: { member: number; label?: string };
  requests: CheckinRequest[];
  answer?: CheckinAnswer;
  home?: CheckinHome;
  panics?: CirclePanic[];
}

export interface CheckinRequested { type: 'checkin.requested'; circle: string; member: number; label?: string; at: number }
export interface CheckinAnswered { type: 'checkin.answered'; circle: string; answer: CheckinAnswer }
export interface CheckinHomeEvent { type: 'checkin.home'; circle: string; state: 'set' | 'cleared' | 'lapsed'; until?: number; at: number }
export interface CheckinRevoked { type: 'checkin.revoked'; circle: string; member: number }
export interface CheckinClosed { type: 'checkin.closed'; circle: string; reason: 'closed' | 'idle'; at: number }
/** A panic stream of the circle started, was escalated (a missed check-in) or ended. */
export interface CheckinPanic {
  type: 'checkin.panic'; circle: string; stream: string; event: 'started' | 'escalated' | 'ended';
  status: 'red' | 'amber'; at: number; reason?: 'safe' | 'cancelled' | 'abandoned';
}
export type CheckinEvent = CheckinRequested | CheckinAnswered | CheckinHomeEvent | CheckinRevoked | CheckinClosed | CheckinPanic;

/** What `PushSubscription.toJSON()` gives (`expirationTime` is not sent to the server). */
export interface PushSubscriptionJSON { endpoint: string; expirationTime?: number | null; keys: { p256dh: string; auth: string } }

/** A reply `{type:"ok", ref, ...}`; its other fields depend on the op. */
export interface Reply { type: 'ok'; ref: number; [field: string]: unknown }

export class Emitter {
  on(name: string, fn: (payload: any) => void): () => void;
  once(name: string, fn: (payload: any) => void): () => void;
  off(name: string, fn: (payload: any) => void): void;
  emit(name: string, payload?: unknown): void;
}

/**
 * An error reply (`code`, `field`, `retryAfterMs` from the server), or the request's own failure:
 * `timeout`, `disconnected` (a read: the connection went with the request in flight; a write: the
 * connection went with reconnect off), `closed` (close() was called), `outbox_full` (a write made
 * while `maxOutbox` writes wait for their answers), `not_connected`, `no_websocket`. A write that
 * failed with `timeout` may or may not have been applied: send it again with `{idem: err.idem}`
 * to have it applied at most once.
 */
export class VigilError extends Error {
  code: string;
  field?: string;
  retryAfterMs?: number;
  reply?: { type: 'error'; code: string; message: string; field?: string; retry_after_ms?: number };
  op?: string;
  /** A write's idempotency key (`idem`), the one all its sends carried. */
  idem?: string;
}

/**
 * The operations that change state (docs/PROTOCOL.md, "Writes that are safe to retry"): each is
 * sent with an `idem` key, chosen once per write (22 base64url characters of 128 random bits, or
 * the `idem` the caller put in its fields), and goes through the outbox.
 */
export const WRITE_OPS: ReadonlySet<string>;
/** A new idempotency key: 128 random bits as 22 base64url characters. */
export function newIdemKey(): string;

export interface ReconnectOptions {
  /** First delay (default 500 ms); each attempt multiplies it by `factor` (2) up to `maxDelayMs` (15 s). */
  minDelayMs?: number;
  maxDelayMs?: number;
  factor?: number;
  /** Each delay is cut by a random share of up to this (default 0.5), so clients do not return in step. */
  jitter?: number;
}

export interface VigilClientOptions {
  /** A WebSocket constructor; default the global one, else the `ws` package. */
  WebSocket?: unknown;
  protocols?: string[];
  /** Per-request timeout (default 10 s), including the wait for the connection. */
  requestTimeoutMs?: number;
  /** How long connect() waits for the first welcome (default: until it comes or close()). */
  connectTimeoutMs?: number;
  /** How long one connection attempt may take to be welcomed before it is given up (default 10 s). */
  attemptTimeoutMs?: number;
  /**
   * After this long without a message from the server, check the connection with a harmless
   * request; no answer within `heartbeatTimeoutMs` (10 s) reconnects at once (event `stalled`).
   * 0 (the default): no checks; a connection that died silently is noticed by the system's TCP timeout.
   */
  heartbeatMs?: number;
  heartbeatTimeoutMs?: number;
  /** How many times a request refused with rate_limited is retried after the server's retry_after_ms (default 3). */
  rateLimitRetries?: number;
  /**
   * Writes that may wait for their answer at once (default 100): made while the connection is
   * away, or sent and not answered when it went. Each is sent (again, with the same `idem` key) on
   * reconnect, in the order made, and ends in its answer (`repeat: true` when the server had
   * applied it already) or a VigilError: `timeout` (its `timeoutMs`, counted from when it was
   * made), `closed`, `outbox_full` (refused at once when this many wait), or `disconnected`
   * (reconnect off).
   */
  maxOutbox?: number;
  /** false: no reconnect (the client closes when the connection goes). */
  reconnect?: ReconnectOptions | false;
  random?: () => number;
}

export interface RequestOptions { timeoutMs?: number; retryRateLimited?: boolean }

export class VigilClient extends Emitter {
  constructor(url: string, options?: VigilClientOptions);
  readonly url: string;
  state: 'idle' | 'connecting' | 'open' | 'closed';
  welcome: Welcome | null;
  /** Connections opened so far (2 after the first reconnect). */
  connections: number;
  readonly session: string | undefined;
  readonly limits: Limits | undefined;
  readonly isOpen: boolean;
  readonly subscription: { area: Area; categories?: string[] } | null;

  connect(): Promise<Welcome>;
  close(): void;
  /** Drops the connection and connects again at once (a page told the network is back). */
  reconnectNow(): void;
  /**
   * Any operation. A write (`WRITE_OPS`) gets an `idem` key unless `fields` has one, and goes
   * through the outbox: a lost connection does not fail it, it is sent again on reconnect.
   */
  request(op: string, fields?: Record<string, unknown>, options?: RequestOptions): Promise<Reply>;
  /** Writes waiting for their answer (sent or not). */
  readonly outboxSize: number;

  subscribe(area: Area, options?: { categories?: string[] }): Promise<Reply & { pins: Pin[]; truncated?: boolean }>;
  unsubscribe(): Promise<Reply>;
  /**
   * Resolves once the server answered (after a reconnect if the connection went first); rejects
   * with the server's error (`forbidden`: a wrong or withdrawn token, or a stream long ended).
   * `attach` is called with the Watch before the request is sent: listeners added there miss nothing.
   */
  watch(stream: string, watchToken: string, options?: { since?: number; attach?: (watch: Watch) => void }): Promise<Watch>;
  /** As a member of the stream's check-in circle: `panic.watch` with the member token. */
  watch(stream: string, options: { memberToken: string; since?: number; attach?: (watch: Watch) => void }): Promise<Watch>;
  /**
   * `due_in_s` / `due_at`: a safety timer (amber only; docs/PROTOCOL.md "Safety timer").
   * `circle` with the circle's `ownerToken`: a stream of the circle, which its members hear of
   * (`checkin.panic`) and may watch with their member tokens.
   * `e2e: true` (or a `{key, kid}` of your own): an end-to-end encrypted stream. The position and
   * note are sealed for seq 1 and `status`, never sent in clear; with `memberSecrets` (a circle's
   * member numbers and their 32-byte secrets) each member gets a box with the stream key. The
   * Owner's `e2e` holds the key to hand the direct contacts (`watchLink(..., owner.e2e.key)`).
   */
  startPanic(fields: Position & { status: 'red' | 'amber'; note?: string; watchers?: number; due_in_s?: number; due_at?: number; circle?: string; ownerToken?: string } & E2EStartOptions): Promise<Owner>;
  /** `e2e`: the stream's `{key, kid}` kept by the app, so sealed updates go on after the resume. */
  resumePanic(stream: string, ownerToken: string, options?: { e2e?: StreamKeys; memberSecrets?: MemberSecrets }): Promise<Owner>;

  /** Makes a circle and listens to it as its owner; `memberTokens` and `ownerToken` are shown this once. */
  createCircle(members?: (string | null)[]): Promise<Circle & { memberTokens: { member: number; label: string | null; token: string }[]; expiresAt: number }>;
  openCircle(circle: string, ownerToken: string): Promise<Circle>;
  joinCircle(circle: string, memberToken: string): Promise<Circle>;
  /** Registers a Web Push subscription for the circle's notices; resolves with its id. */
  registerPush(circle: string, credential: CircleCredential, subscription: PushSubscriptionJSON): Promise<string>;
  /** Registers the operator's relay handle (a native app) for the circle's notices; resolves with its id. */
  registerRelay(circle: string, credential: CircleCredential, handle: string): Promise<string>;
  unregister(circle: string, credential: CircleCredential, subscription: string): Promise<void>;
  /** "I have seen it": acknowledges a notice (its id from the push payload or the page's link). */
  ack(circle: string, credential: CircleCredential, notice: string): Promise<void>;

  on(name: 'open', fn: (e: { welcome: Welcome; reconnected: boolean }) => void): () => void;
  on(name: 'reconnected', fn: (e: { welcome: Welcome }) => void): () => void;
  on(name: 'disconnected', fn: (e: { code: number; reason: string }) => void): () => void;
  on(name: 'reconnecting', fn: (e: { attempt: number; delayMs: number }) => void): () => void;
  on(name: 'rate_limited', fn: (e: { op: string; retryAfterMs: number }) => void): () => void;
  on(name: 'pins', fn: (e: { pins: Pin[]; truncated: boolean; resubscribed: boolean }) => void): () => void;
  on(name: 'pin.added' | 'pin.updated' | 'pin.expired', fn: (e: { type: string; pin: Pin }) => void): () => void;
  on(name: 'pin.removed', fn: (e: { type: 'pin.removed'; pin: Pin; reason: 'deleted' | 'moved' | 'flagged' }) => void): () => void;
  on(name: 'stalled', fn: (e: { silentMs: number }) => void): () => void;
  on(name: 'checkin.panic', fn: (e: CheckinPanic) => void): () => void;
  on(name: 'closed', fn: () => void): () => void;
  on(name: 'error', fn: (e: Error) => void): () => void;
  on(name: string, fn: (payload: any) => void): () => void;
}

/** A watched stream: events with a seq exactly once and in order, across reconnects. */
export class Watch extends Emitter {
  readonly stream: string;
  readonly token: string;
  /** Which token `token` is: a watch token, or a member token of the stream's circle. */
  readonly credential: 'watch_token' | 'member_token';
  lastSeq: number;
  state: StreamState | null;
  active: boolean;
  unwatch(): Promise<void>;
  on(name: 'state', fn: (e: { state: StreamState; gap: boolean }) => void): () => void;
  on(name: 'gap', fn: (e: { state: StreamState; lastSeq: number }) => void): () => void;
  on(name: 'location', fn: (e: PanicLocation) => void): () => void;
  on(name: 'status', fn: (e: PanicStatus) => void): () => void;
  on(name: 'ended', fn: (e: PanicEnded) => void): () => void;
  on(name: 'stale', fn: (e: PanicStale) => void): () => void;
  on(name: 'revoked', fn: (e: PanicRevoked) => void): () => void;
  on(name: 'event', fn: (e: PanicEvent) => void): () => void;
  on(name: string, fn: (payload: any) => void): () => void;
}

/** A stream this client owns. Every request carries the owner token, so it works before the resume too. */
export class Owner extends Emitter {
  readonly stream: string;
  readonly ownerToken: string;
  watchTokens: string[];
  /** The check-in circle the stream was started for, or null. */
  circle: string | null;
  seq: number;
  watchers: number;
  ended: boolean;
  /** An end-to-end encrypted stream's current key and kid, or null for a clear stream. */
  e2e: StreamKeys | null;
  /** The member secrets the boxes are made from (kept for `rekey`). */
  memberSecrets: MemberSecrets | null;
  /** How many times a sealed update is sealed again after `seq_mismatch` before it fails (default 5). */
  maxReseals: number;
  /**
   * On an e2e stream the position (and `note`) is sealed for seq + 1 and the status; after
   * `seq_mismatch` it is sealed again for the server's `current_seq` + 1 and `status` and resent.
   */
  update(position: E2EPosition, options?: RequestOptions): Promise<number>;
  /** A new key and kid for an e2e stream (`panic.rekey`), with boxes for `memberSecrets` (default: those held). */
  rekey(options?: { memberSecrets?: MemberSecrets | null }, requestOptions?: RequestOptions): Promise<StreamKeys>;
  /** `red` or `amber`: as started, as last set, or as the server had it on resume. */
  status: 'red' | 'amber' | null;
  setStatus(status: 'red' | 'amber', options?: RequestOptions): Promise<number>;
  /** The safety timer's deadline (unix ms) as the server keeps it, or null. */
  dueAt: number | null;
  /** Sets or moves the safety timer (amber streams only); resolves with the deadline. */
  setTimer(timer: { due_in_s: number } | { due_at: number }, options?: RequestOptions): Promise<number>;
  cancelTimer(options?: RequestOptions): Promise<void>;
  /** Set once the server raised the alarm for a missed check-in (live, or as `panic.resume` reported it). */
  escalated: Escalation | null;
  end(reason?: 'safe' | 'cancelled', options?: RequestOptions): Promise<number>;
  invite(options?: RequestOptions): Promise<string>;
  revoke(watchToken: string, options?: RequestOptions): Promise<void>;
  on(name: 'watchers', fn: (count: number) => void): () => void;
  on(name: 'resumed', fn: (state: StreamState) => void): () => void;
  /** A sealed update was refused with `seq_mismatch` and is sealed again for this seq and status. */
  on(name: 'resealed', fn: (e: { seq: number; status: 'red' | 'amber' }) => void): () => void;
  on(name: 'rekeyed', fn: (keys: StreamKeys) => void): () => void;
  /** The timer passed without a check-in: the server turned the stream red and told every watcher. */
  on(name: 'missedCheckIn', fn: (event: { seq: number; due_at: number; last: Position & { at: number }; at: number; sent_at: number }) => void): () => void;
  on(name: string, fn: (payload: any) => void): () => void;
}

/**
 * A check-in circle this client listens to (as its owner or a member), re-opened after each
 * reconnect. `state` and `panics` are kept by the circle's news.
 */
export class Circle extends Emitter {
  readonly id: string;
  readonly role: 'owner' | 'member';
  readonly credential: CircleCredential;
  readonly ownerToken: string | null;
  readonly memberToken: string | null;
  state: CircleState | null;
  panics: CirclePanic[];
  /** False once revoked, closed or left. */
  active: boolean;
  // The owner's:
  invite(label?: string | null): Promise<{ member: number; label: string | null; token: string }>;
  revoke(member: number): Promise<void>;
  answer(options?: { note?: string }): Promise<CheckinAnswer>;
  home(spec: { for_s: number } | { until: number } | { clear: true }): Promise<CheckinHome | null>;
  close(): Promise<void>;
  startPanic(fields: Position & { status: 'red' | 'amber'; note?: string; watchers?: number; due_in_s?: number; due_at?: number } & E2EStartOptions): Promise<Owner>;
  // A member's:
  /** "Are you safe?"; resolves with the request's time. */
  request(): Promise<number>;
  watch(stream: string, options?: { since?: number; attach?: (watch: Watch) => void }): Promise<Watch>;
  // Both:
  leave(): Promise<void>;
  registerPush(subscription: PushSubscriptionJSON): Promise<string>;
  registerRelay(handle: string): Promise<string>;
  unregister(subscription: string): Promise<void>;
  on(name: 'state', fn: (state: CircleState) => void): () => void;
  on(name: 'requested', fn: (e: CheckinRequested) => void): () => void;
  on(name: 'answered', fn: (e: CheckinAnswered) => void): () => void;
  on(name: 'home', fn: (e: CheckinHomeEvent) => void): () => void;
  on(name: 'panic', fn: (e: CheckinPanic) => void): () => void;
  on(name: 'revoked', fn: (e: CheckinRevoked) => void): () => void;
  on(name: 'closed', fn: (e: CheckinClosed) => void): () => void;
  on(name: 'event', fn: (e: CheckinEvent) => void): () => void;
  on(name: 'change', fn: (circle: Circle) => void): () => void;
  on(name: string, fn: (payload: any) => void): () => void;
}

export class MapModel extends Emitter {
  constructor(client: VigilClient);
  pins: Map<string, Pin>;
  truncated: boolean;
  reconcile(pins: Pin[], truncated?: boolean): void;
  dispose(): void;
  static timeLeftMs(pin: Pin, now?: number): number;
  on(name: 'added' | 'updated', fn: (pin: Pin) => void): () => void;
  on(name: 'removed', fn: (e: { pin: Pin; reason: 'deleted' | 'moved' | 'flagged' | 'expired' | 'reconciled' }) => void): () => void;
  on(name: 'change', fn: (model: MapModel) => void): () => void;
  on(name: string, fn: (payload: any) => void): () => void;
}

/**
 * The key a WatchModel opens an e2e stream's points with: the page's fragment (`k=`), the key,
 * a circle member's secret and number (its box comes in the watch reply), or a view.
 */
export type WatchKey = string | { key: Uint8Array } | { memberSecret: Uint8Array; member?: number } | E2EWatchView;

/** One point of an e2e stream: opened (a position), or not (`label` is 'cannot decrypt this update'; no position). */
export type WatchPoint =
  | { seq: number; at: number; ok: true; position: E2EPosition }
  | { seq: number; at: number; ok: false; label: string; position?: undefined };

export class WatchModel extends Emitter {
  constructor(watch: Watch, options?: { maxTrail?: number; e2e?: WatchKey });
  /** Watches with a model attached from the start. */
  static open(client: VigilClient, stream: string, credential: string | { watchToken: string } | { memberToken: string }, options?: { since?: number; maxTrail?: number; e2e?: WatchKey }): Promise<WatchModel>;
  /** True for an end-to-end encrypted stream. */
  e2e: boolean;
  /** Every point of an e2e stream, opened or not, oldest first. */
  points: WatchPoint[];
  /** How many points did not open. */
  undecryptable: number;
  /** The one sentence about a missing or wrong key, or null. */
  notice: string | null;
  readonly view: E2EWatchView;
  /** Resolves once every event received so far is applied (its points opened or refused). */
  settled(): Promise<void>;
  readonly watch: Watch;
  status: 'red' | 'amber' | null;
  note: string | null;
  last: (Position & { at: number }) | null;
  trail: TrailPoint[];
  stale: boolean;
  ended: { reason: string; at: number } | null;
  revoked: boolean;
  /** The safety timer's deadline (unix ms), or null. */
  dueAt: number | null;
  /** Set once the server raised the alarm because the timer passed with no check-in. */
  escalated: Escalation | null;
  gaps: number;
  lastSeq: number;
  readonly lastUpdateAt: number | null;
  dispose(): void;
  on(name: 'change', fn: (model: WatchModel) => void): () => void;
  on(name: 'point', fn: (point: WatchPoint) => void): () => void;
  on(name: 'notice', fn: (notice: string | null) => void): () => void;
  on(name: string, fn: (payload: any) => void): () => void;
}

export interface GeolocationLike {
  watchPosition(success: (p: any) => void, error?: (e: any) => void, options?: object): number;
  clearWatch(id: number): void;
}

/** Sends a position feed as panic.update, at most one every minIntervalMs (default 1000); returns stop(). */
export function followPosition(
  owner: Owner,
  source: GeolocationLike | ((onPosition: (p: Position | { coords: any }) => void, onError: (e: unknown) => void) => (() => void) | void),
  options?: { minIntervalMs?: number; onError?: (e: unknown) => void; onSent?: (seq: number, update: Position) => void; geolocationOptions?: object },
): () => void;

// ---------------------------------------------------------------------------
// End-to-end encrypted streams (docs/design/e2e-streams.md, format version 1): `e2e.*`.

export type E2EErrorCode = 'cannot_decrypt' | 'invalid_position' | 'invalid_key' | 'invalid_kid' | 'invalid_seq' | 'invalid_status' | 'invalid_member';

/** Why a key, a kid or a sealed value was refused; `cannot_decrypt` is never a position. */
export declare class E2EError extends Error {
  constructor(code: E2EErrorCode, message?: string);
  readonly code: E2EErrorCode;
}

/** A sealed update's position: the clear fields and the note. */
export interface E2EPosition extends Position { note?: string }

export interface StreamKey { key: Uint8Array; kid: string }

export type FragmentKey = { state: 'absent' } | { state: 'invalid' } | { state: 'ok'; key: Uint8Array };

export interface E2EModule {
  readonly E2E_VERSION: 1;
  readonly E2EError: typeof E2EError;
  newStreamKey(): Promise<StreamKey>;
  newMemberSecret(): Promise<Uint8Array>;
  /** base64url of nonce ‖ ciphertext ‖ tag, under AAD kid/seq/status. */
  seal(key: Uint8Array, kid: string, seq: number, status: 'red' | 'amber', position: E2EPosition): Promise<string>;
  /** Rejects with E2EError `cannot_decrypt` when it does not open, `invalid_position` when it opens to no position. */
  open(key: Uint8Array, kid: string, seq: number, status: 'red' | 'amber', sealed: string): Promise<E2EPosition>;
  wrapForMember(memberSecret: Uint8Array, kid: string, member: number, streamKey: Uint8Array): Promise<string>;
  unwrapForMember(memberSecret: Uint8Array, kid: string, member: number, box: string): Promise<Uint8Array>;
  memberWrapKey(memberSecret: Uint8Array): Promise<Uint8Array>;
  encodePlaintext(position: E2EPosition): Uint8Array;
  decodePlaintext(bytes: Uint8Array): E2EPosition;
  associatedData(kid: string, seq: number, status: 'red' | 'amber'): Uint8Array;
  boxAssociatedData(kid: string, member: number): Uint8Array;
  base64urlEncode(bytes: Uint8Array): string;
  base64urlDecode(text: string): Uint8Array | null;
  encodeKey(key: Uint8Array): string;
  decodeKey(text: string): Uint8Array | null;
  isKid(kid: string): boolean;
  keyFromFragment(fragment: string): FragmentKey;
}

export const e2e: E2EModule;

/** A stream key (32 bytes) and its kid (22 characters of base64url). */
export interface StreamKeys { key: Uint8Array; kid: string }
/** A circle's member numbers and their 32-byte secrets (`ms` of the invitation links). */
export type MemberSecrets = Map<number, Uint8Array> | { member: number; secret: Uint8Array }[] | Record<number, Uint8Array>;
export interface E2EStartOptions { e2e?: boolean | StreamKeys; memberSecrets?: MemberSecrets }

/** The label of a point that does not open. */
export const CANNOT_DECRYPT: 'cannot decrypt this update';
/** The sentences of the one notice about the key. */
export const KEY_NOTICES: { absent: string; invalid: string; wrong: string; rekeyed: string; box: string; nobox: string };

/** What a watch page shows for an e2e stream: each point opened, or the label; one notice about the key. */
export declare class E2EWatchView {
  constructor(source?: string | { key: Uint8Array } | { memberSecret: Uint8Array; member?: number });
  key: Uint8Array | null;
  notice: string | null;
  noticeChanged: boolean;
  point(p: { sealed: string; kid: string; seq: number; status: 'red' | 'amber' }): Promise<{ ok: true; position: E2EPosition } | { ok: false; label: string }>;
  box(box: string | { box: string; member?: number; kid?: string }, kids: (string | undefined)[]): Promise<boolean>;
}

/** `origin/watch#s=STREAM&t=TOKEN`, and `&k=KEY` for an e2e stream: the key only ever in the fragment. */
export function watchLink(origin: string, stream: string, token: string, key?: Uint8Array | null): string;
