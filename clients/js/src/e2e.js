// End-to-end encrypted panic streams, format version 1 (docs/design/e2e-streams.md): a key per
// stream and its kid, sealing and opening a position with AES-256-GCM under associated data that
// binds the kid, the seq and the status, and the per-member key boxes of a circle.
//
// WebCrypto only (`crypto.subtle`): browsers, Node 20+ (globalThis.crypto), and Node 18 through
// `node:crypto`'s webcrypto. Nothing here talks to a server; clients/e2e-vectors/vectors.json holds
// the test vectors an independent implementation made.

const encoder = new TextEncoder();
const decoder = new TextDecoder('utf-8', { fatal: true });

/** The format version this module seals and opens. */
export const E2E_VERSION = 1;
/** The ASCII label at the head of an update's associated data (and the member box's HKDF salt). */
const LABEL = encoder.encode('vigil-e2e-v1');
/** The ASCII label at the head of a member box's associated data. */
const BOX_LABEL = encoder.encode('vigil-e2e-box-v1');
/** HKDF-SHA256's info for a member's wrapping key. */
const WRAP_INFO = encoder.encode('vigil e2e member wrap v1');
const KEY_BYTES = 32;
const KID_BYTES = 16;
const NONCE_BYTES = 12;
const TAG_BYTES = 16;
const PAD = 64;
const FIELDS = ['lat', 'lon', 'accuracy_m', 'heading', 'speed_mps', 'note'];

/**
 * Why a key, a kid or a sealed value was refused. `code`:
 * - `cannot_decrypt`: the sealed value or box does not open with this key, kid, seq and status
 *   (tampered, replayed with another seq or status, moved from another stream, wrong key, not
 *   base64url, too short). Never a position.
 * - `invalid_position`: it opened, but what is inside is not a valid position.
 * - `invalid_key`, `invalid_kid`, `invalid_seq`, `invalid_status`, `invalid_member`: an argument.
 */
export class E2EError extends Error {
  constructor(code, message) {
    super(message ?? code);
    this.name = 'E2EError';
    this.code = code;
  }
}

let webcryptoPromise = null;
/** The platform's WebCrypto: globalThis.crypto, or node:crypto's webcrypto (Node 18). */
async function webcrypto() {
  if (globalThis.crypto?.subtle && globalThis.crypto.getRandomValues) return globalThis.crypto;
  webcryptoPromise ??= import('node:crypto').then((m) => m.webcrypto);
  return webcryptoPromise;
}

async function randomBytes(count) {
  const c = await webcrypto();
  return c.getRandomValues(new Uint8Array(count));
}

// MARK: base64url

/** base64url without padding (RFC 4648 §5). */
export function base64urlEncode(bytes) {
  let binary = '';
  for (const b of bytes) binary += String.fromCharCode(b);
  return btoa(binary).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

/** The bytes of unpadded base64url, or null if `text` is not that (other characters, padding, an impossible length). */
export function base64urlDecode(text) {
  if (typeof text !== 'string' || !/^[A-Za-z0-9_-]*$/.test(text) || text.length % 4 === 1) return null;
  const b64 = text.replace(/-/g, '+').replace(/_/g, '/') + '='.repeat((4 - (text.length % 4)) % 4);
  let binary;
  try { binary = atob(b64); } catch { return null; }
  const out = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) out[i] = binary.charCodeAt(i);
  // Non-canonical trailing bits (e.g. "AB" for one byte) would let two strings name one key.
  if (base64urlEncode(out) !== text) return null;
  return out;
}

/** A stream key's 43 characters of base64url. */
export function encodeKey(key) {
  checkKey(key);
  return base64urlEncode(key);
}

/** A stream key from its base64url (43 characters), or null if it is not one. */
export function decodeKey(text) {
  const bytes = base64urlDecode(text);
  return bytes && bytes.length === KEY_BYTES ? bytes : null;
}

/** Whether `kid` is a key id: 16 bytes as 22 characters of base64url. */
export function isKid(kid) {
  if (typeof kid !== 'string' || kid.length !== 22) return false;
  const bytes = base64urlDecode(kid);
  return bytes !== null && bytes.length === KID_BYTES;
}

// MARK: keys

/** A new stream key: 32 random bytes, and its kid (16 random bytes, base64url). */
export async function newStreamKey() {
  return { key: await randomBytes(KEY_BYTES), kid: base64urlEncode(await randomBytes(KID_BYTES)) };
}

/** A new member secret (`ms` in the invitation link's fragment): 32 random bytes. */
export async function newMemberSecret() {
  return randomBytes(KEY_BYTES);
}

function checkKey(key) {
  if (!(key instanceof Uint8Array) || key.length !== KEY_BYTES) throw new E2EError('invalid_key', 'a key is 32 bytes (a Uint8Array)');
}

function checkKid(kid) {
  if (!isKid(kid)) throw new E2EError('invalid_kid', 'a kid is 22 characters of base64url (16 bytes)');
}

function checkSeq(seq) {
  if (!Number.isSafeInteger(seq) || seq < 0) throw new E2EError('invalid_seq', 'a seq is a non-negative safe integer');
}

function statusByte(status) {
  if (status === 'red') return 0x72; // 'r'
  if (status === 'amber') return 0x61; // 'a'
  throw new E2EError('invalid_status', "a status is 'red' or 'amber'");
}

function u64be(value) {
  const out = new Uint8Array(8);
  new DataView(out.buffer).setBigUint64(0, BigInt(value), false);
  return out;
}

function concat(...parts) {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) { out.set(p, at); at += p.length; }
  return out;
}

/** An update's associated data: "vigil-e2e-v1" 0x00 kid 0x00 seq (u64 BE) status ('r' or 'a'). */
export function associatedData(kid, seq, status) {
  checkKid(kid);
  checkSeq(seq);
  return concat(LABEL, [0], encoder.encode(kid), [0], u64be(seq), [statusByte(status)]);
}

/** A member box's associated data: "vigil-e2e-box-v1" 0x00 kid 0x00 member (u64 BE). */
export function boxAssociatedData(kid, member) {
  checkKid(kid);
  if (!Number.isSafeInteger(member) || member < 0) throw new E2EError('invalid_member', 'a member is a non-negative safe integer');
  return concat(BOX_LABEL, [0], encoder.encode(kid), [0], u64be(member));
}

// MARK: the plaintext

function finite(v) { return typeof v === 'number' && Number.isFinite(v); }

/** A position's fields checked by the rules of a clear update; throws `invalid_position`. */
function checkPosition(p) {
  const bad = (why) => { throw new E2EError('invalid_position', why); };
  if (p === null || typeof p !== 'object' || Array.isArray(p)) bad('a position is an object');
  if (!finite(p.lat) || p.lat < -90 || p.lat > 90) bad('lat is a number in [-90, 90]');
  if (!finite(p.lon) || p.lon < -180 || p.lon > 180) bad('lon is a number in [-180, 180]');
  if (p.accuracy_m != null && (!finite(p.accuracy_m) || p.accuracy_m < 0 || p.accuracy_m > 100000)) bad('accuracy_m is a number in [0, 100000]');
  if (p.heading != null && (!finite(p.heading) || p.heading < 0 || p.heading > 360)) bad('heading is a number in [0, 360]');
  if (p.speed_mps != null && (!finite(p.speed_mps) || p.speed_mps < 0 || p.speed_mps > 1000)) bad('speed_mps is a number in [0, 1000]');
  if (p.note != null && typeof p.note !== 'string') bad('note is a string');
}

/** The known fields present (not null/undefined), in the format's order. */
function known(p) {
  const out = {};
  for (const f of FIELDS) if (p[f] != null) out[f] = p[f];
  return out;
}

/** The plaintext of a position: compact JSON in the format's field order, UTF-8, then spaces to a multiple of 64 bytes. */
export function encodePlaintext(position) {
  checkPosition(position);
  const body = encoder.encode(JSON.stringify(known(position)));
  const padded = new Uint8Array(Math.ceil(body.length / PAD) * PAD).fill(0x20);
  padded.set(body);
  return padded;
}

/** The position in an opened plaintext; throws `invalid_position`. */
export function decodePlaintext(bytes) {
  let value;
  try { value = JSON.parse(decoder.decode(bytes)); } catch { throw new E2EError('invalid_position', 'not UTF-8 JSON'); }
  checkPosition(value);
  return known(value);
}

// MARK: AES-256-GCM

async function aesKey(raw, usage) {
  return (await webcrypto()).subtle.importKey('raw', raw, { name: 'AES-GCM' }, false, [usage]);
}

async function gcmSeal(key, nonce, plaintext, aad) {
  const k = await aesKey(key, 'encrypt');
  const ct = new Uint8Array(await (await webcrypto()).subtle.encrypt({ name: 'AES-GCM', iv: nonce, additionalData: aad, tagLength: 128 }, k, plaintext));
  return base64urlEncode(concat(nonce, ct));
}

/** The plaintext, or throws `cannot_decrypt`. */
async function gcmOpen(key, sealed, aad) {
  const bytes = base64urlDecode(sealed);
  if (bytes === null || bytes.length < NONCE_BYTES + TAG_BYTES) throw new E2EError('cannot_decrypt', 'not a sealed value');
  const k = await aesKey(key, 'decrypt');
  try {
    return new Uint8Array(await (await webcrypto()).subtle.decrypt(
      { name: 'AES-GCM', iv: bytes.subarray(0, NONCE_BYTES), additionalData: aad, tagLength: 128 }, k, bytes.subarray(NONCE_BYTES)));
  } catch {
    throw new E2EError('cannot_decrypt', 'does not open with this key, kid, seq and status');
  }
}

async function sealWithNonce(key, kid, seq, status, position, nonce) {
  checkKey(key);
  if (!(nonce instanceof Uint8Array) || nonce.length !== NONCE_BYTES) throw new TypeError('a nonce is 12 bytes');
  return gcmSeal(key, nonce, encodePlaintext(position), associatedData(kid, seq, status));
}

/**
 * `position` sealed for the stream's key and kid, the seq the owner expects the server to give
 * it, and the status: base64url of nonce ‖ ciphertext ‖ tag, the nonce 12 random bytes.
 */
export async function seal(key, kid, seq, status, position) {
  return sealWithNonce(key, kid, seq, status, position, await randomBytes(NONCE_BYTES));
}

/**
 * The position in `sealed`, opened with the stream's key under the kid, seq and status it came
 * with. Throws E2EError `cannot_decrypt` (never a position) when it does not open, and
 * `invalid_position` when it opens to something that is not a position.
 */
export async function open(key, kid, seq, status, sealed) {
  checkKey(key);
  const aad = associatedData(kid, seq, status);
  return decodePlaintext(await gcmOpen(key, sealed, aad));
}

// MARK: member boxes

/** A member's wrapping key: HKDF-SHA256(ikm = member secret, salt = "vigil-e2e-v1", info = "vigil e2e member wrap v1"), 32 bytes. */
export async function memberWrapKey(memberSecret) {
  if (!(memberSecret instanceof Uint8Array) || memberSecret.length !== KEY_BYTES) throw new E2EError('invalid_key', 'a member secret is 32 bytes');
  const c = await webcrypto();
  const ikm = await c.subtle.importKey('raw', memberSecret, 'HKDF', false, ['deriveBits']);
  return new Uint8Array(await c.subtle.deriveBits({ name: 'HKDF', hash: 'SHA-256', salt: LABEL, info: WRAP_INFO }, ikm, 256));
}

async function wrapWithNonce(memberSecret, kid, member, streamKey, nonce) {
  checkKey(streamKey);
  const aad = boxAssociatedData(kid, member);
  return gcmSeal(await memberWrapKey(memberSecret), nonce, streamKey, aad);
}

/** The stream key boxed for one circle member: base64url of nonce ‖ AES-256-GCM(wrap key, stream key, box AAD) ‖ tag. */
export async function wrapForMember(memberSecret, kid, member, streamKey) {
  return wrapWithNonce(memberSecret, kid, member, streamKey, await randomBytes(NONCE_BYTES));
}

/** The stream key in a member's box; throws `cannot_decrypt` when it does not open (another member, another kid, tampered). */
export async function unwrapForMember(memberSecret, kid, member, box) {
  const aad = boxAssociatedData(kid, member);
  const key = await gcmOpen(await memberWrapKey(memberSecret), box, aad);
  if (key.length !== KEY_BYTES) throw new E2EError('cannot_decrypt', 'a box holds a 32-byte key');
  return key;
}

// MARK: links

/**
 * The stream key in a watch link's fragment (`#s=…&t=…&k=…`, with or without the '#'):
 * `{ state: 'absent' }` when there is no `k`, `{ state: 'invalid' }` when `k` is not a
 * 43-character base64url key, else `{ state: 'ok', key }`.
 */
export function keyFromFragment(fragment) {
  const params = new URLSearchParams(String(fragment ?? '').replace(/^#/, ''));
  const k = params.get('k');
  if (k === null || k === '') return { state: 'absent' };
  const key = decodeKey(k);
  return key ? { state: 'ok', key } : { state: 'invalid' };
}

/** Test-only: sealing and wrapping with a given nonce, for the test vectors. Real sealing never takes a nonce. */
export const _testing = { sealWithNonce, wrapWithNonce };
