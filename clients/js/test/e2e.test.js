// The e2e module without a server: round trips, every way an update must fail to open, padding,
// member boxes, the watch link's `k`, and the test vectors of an independent implementation
// (clients/e2e-vectors/vectors.json, from Python's `cryptography`).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { webcrypto } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import {
  E2EError, newStreamKey, newMemberSecret, seal, open, wrapForMember, unwrapForMember,
  encodePlaintext, decodePlaintext, associatedData, boxAssociatedData, memberWrapKey,
  base64urlEncode, base64urlDecode, encodeKey, decodeKey, isKid, keyFromFragment, _testing,
} from '../src/e2e.js';

const vectors = JSON.parse(readFileSync(new URL('../../e2e-vectors/vectors.json', import.meta.url), 'utf8'));
const position = { lat: 51.5007, lon: -0.1246, accuracy_m: 12.5, heading: 270, speed_mps: 1.25, note: 'near the bridge' };

async function rejectsWith(promise, code) {
  await assert.rejects(promise, (e) => e instanceof E2EError && e.code === code);
}

/** `sealed` with one byte of its decoded form flipped at `index`. */
function flip(sealed, index) {
  const bytes = base64urlDecode(sealed);
  bytes[index] ^= 0x01;
  return base64urlEncode(bytes);
}

test('a new stream key: 32 bytes, a 22-character kid, never the same twice', async () => {
  const a = await newStreamKey();
  const b = await newStreamKey();
  assert.equal(a.key.length, 32);
  assert.ok(isKid(a.kid));
  assert.equal(a.kid.length, 22);
  assert.notDeepEqual(a.key, b.key);
  assert.notEqual(a.kid, b.kid);
  assert.equal(encodeKey(a.key).length, 43);
  assert.deepEqual(decodeKey(encodeKey(a.key)), a.key);
});

test('seal then open gives the position back, for both statuses, seq 1 and a large seq', async () => {
  const { key, kid } = await newStreamKey();
  for (const [seq, status] of [[1, 'red'], [2, 'amber'], [Number.MAX_SAFE_INTEGER, 'red']]) {
    const sealed = await seal(key, kid, seq, status, position);
    assert.match(sealed, /^[A-Za-z0-9_-]+$/);
    assert.deepEqual(await open(key, kid, seq, status, sealed), position);
  }
  const minimal = { lat: 0, lon: 0 };
  assert.deepEqual(await open(key, kid, 1, 'red', await seal(key, kid, 1, 'red', minimal)), minimal);
});

test('two seals of one position differ (random nonce)', async () => {
  const { key, kid } = await newStreamKey();
  assert.notEqual(await seal(key, kid, 1, 'red', position), await seal(key, kid, 1, 'red', position));
});

test('a tampered byte anywhere (nonce, ciphertext, tag) does not open', async () => {
  const { key, kid } = await newStreamKey();
  const sealed = await seal(key, kid, 5, 'red', position);
  const length = base64urlDecode(sealed).length;
  for (const index of [0, 11, 12, 40, length - 17, length - 1]) {
    await rejectsWith(open(key, kid, 5, 'red', flip(sealed, index)), 'cannot_decrypt');
  }
  await rejectsWith(open(key, kid, 5, 'red', sealed.slice(0, -4)), 'cannot_decrypt');
});

test('another seq, another status, another kid, another key: none opens', async () => {
  const { key, kid } = await newStreamKey();
  const other = await newStreamKey();
  const sealed = await seal(key, kid, 5, 'red', position);
  await rejectsWith(open(key, kid, 6, 'red', sealed), 'cannot_decrypt');
  await rejectsWith(open(key, kid, 4, 'red', sealed), 'cannot_decrypt');
  await rejectsWith(open(key, kid, 5, 'amber', sealed), 'cannot_decrypt');
  await rejectsWith(open(key, other.kid, 5, 'red', sealed), 'cannot_decrypt');
  await rejectsWith(open(other.key, kid, 5, 'red', sealed), 'cannot_decrypt');
  await rejectsWith(open(other.key, other.kid, 5, 'red', sealed), 'cannot_decrypt');
});

test('what is not a sealed value is cannot_decrypt, not an exception of another kind', async () => {
  const { key, kid } = await newStreamKey();
  for (const junk of ['', 'A', 'not base64!', 'AAAA', base64urlEncode(new Uint8Array(27)), 'a+b/c=']) {
    await rejectsWith(open(key, kid, 1, 'red', junk), 'cannot_decrypt');
  }
});

test('bad arguments are refused by name', async () => {
  const { key, kid } = await newStreamKey();
  await rejectsWith(seal(new Uint8Array(16), kid, 1, 'red', position), 'invalid_key');
  await rejectsWith(seal(key, 'short', 1, 'red', position), 'invalid_kid');
  await rejectsWith(seal(key, kid, -1, 'red', position), 'invalid_seq');
  await rejectsWith(seal(key, kid, 1.5, 'red', position), 'invalid_seq');
  await rejectsWith(seal(key, kid, 1, 'green', position), 'invalid_status');
  await rejectsWith(seal(key, kid, 1, 'red', { lat: 91, lon: 0 }), 'invalid_position');
  await rejectsWith(seal(key, kid, 1, 'red', { lat: 0 }), 'invalid_position');
  await rejectsWith(seal(key, kid, 1, 'red', { lat: 0, lon: 0, speed_mps: -1 }), 'invalid_position');
  await rejectsWith(seal(key, kid, 1, 'red', { lat: 0, lon: 0, note: 7 }), 'invalid_position');
});

test('something that opens but is not a position is invalid_position', async () => {
  const { key, kid } = await newStreamKey();
  const aad = associatedData(kid, 1, 'red');
  // Sealed by hand, past encodePlaintext's checks.
  const raw = await webcrypto.subtle.importKey('raw', key, 'AES-GCM', false, ['encrypt']);
  const nonce = new Uint8Array(12);
  for (const body of ['{"lat":100,"lon":0}', '[1,2]', 'not json', '{"lon":3}']) {
    const ct = new Uint8Array(await webcrypto.subtle.encrypt({ name: 'AES-GCM', iv: nonce, additionalData: aad }, raw, new TextEncoder().encode(body)));
    const sealed = base64urlEncode(new Uint8Array([...nonce, ...ct]));
    await rejectsWith(open(key, kid, 1, 'red', sealed), 'invalid_position');
  }
});

test('padding: every plaintext is a multiple of 64 bytes, the smallest one that holds it', () => {
  for (let n = 0; n <= 300; n++) {
    const p = { lat: 1, lon: 2, note: 'x'.repeat(n) };
    const bodyLength = new TextEncoder().encode(JSON.stringify(p)).length;
    const bytes = encodePlaintext(p);
    assert.equal(bytes.length % 64, 0, `note of ${n}`);
    assert.ok(bytes.length >= bodyLength && bytes.length - bodyLength < 64, `note of ${n}`);
    assert.ok(bytes.subarray(bodyLength).every((b) => b === 0x20));
    assert.deepEqual(decodePlaintext(bytes), p);
  }
  // A body of exactly 64 bytes takes no padding.
  const exact = { lat: 1, lon: 2, note: 'x'.repeat(64 - '{"lat":1,"lon":2,"note":""}'.length) };
  assert.equal(encodePlaintext(exact).length, 64);
  // The sealed size is the padded size plus nonce and tag.
  const multiByte = { lat: 1, lon: 2, note: 'é🙂'.repeat(20) };
  assert.equal(encodePlaintext(multiByte).length % 64, 0);
});

test('member boxes: the member opens its box; another member, kid, secret or a tampered box does not', async () => {
  const { key, kid } = await newStreamKey();
  const other = await newStreamKey();
  const ms = await newMemberSecret();
  const box = await wrapForMember(ms, kid, 3, key);
  assert.deepEqual(await unwrapForMember(ms, kid, 3, box), key);
  await rejectsWith(unwrapForMember(ms, kid, 4, box), 'cannot_decrypt');
  await rejectsWith(unwrapForMember(ms, other.kid, 3, box), 'cannot_decrypt');
  await rejectsWith(unwrapForMember(await newMemberSecret(), kid, 3, box), 'cannot_decrypt');
  await rejectsWith(unwrapForMember(ms, kid, 3, flip(box, 20)), 'cannot_decrypt');
  assert.equal(base64urlDecode(box).length, 12 + 32 + 16);
});

test('the watch link fragment: k absent, invalid or a key', async () => {
  const { key } = await newStreamKey();
  const k = encodeKey(key);
  assert.deepEqual(keyFromFragment(`#s=S&t=T&k=${k}`), { state: 'ok', key });
  assert.deepEqual(keyFromFragment(`s=S&t=T&k=${k}`), { state: 'ok', key });
  assert.deepEqual(keyFromFragment('#s=S&t=T'), { state: 'absent' });
  assert.deepEqual(keyFromFragment('#s=S&t=T&k='), { state: 'absent' });
  assert.deepEqual(keyFromFragment(''), { state: 'absent' });
  assert.deepEqual(keyFromFragment('#s=S&k=' + k.slice(1)), { state: 'invalid' });
  assert.deepEqual(keyFromFragment('#s=S&k=' + k + 'A'), { state: 'invalid' });
  assert.deepEqual(keyFromFragment('#k=' + k.slice(0, -1) + '!'), { state: 'invalid' });
});

test('base64url: unpadded, URL-safe, canonical only', () => {
  assert.equal(base64urlEncode(new Uint8Array([0xfb, 0xff])), '-_8');
  assert.deepEqual(base64urlDecode('-_8'), new Uint8Array([0xfb, 0xff]));
  assert.equal(base64urlDecode('-_8='), null);
  assert.equal(base64urlDecode('+/8'), null);
  assert.equal(base64urlDecode('A'), null);
  assert.equal(base64urlDecode('-_9'), null); // non-zero trailing bits
  assert.deepEqual(base64urlDecode(''), new Uint8Array(0));
});

test('vectors: every sealed vector opens, and sealing with its nonce gives its bytes exactly', async () => {
  assert.ok(vectors.seal.length >= 3);
  for (const v of vectors.seal) {
    const key = decodeKey(v.key);
    assert.ok(key, v.name);
    assert.equal(Buffer.from(associatedData(v.kid, v.seq, v.status)).toString('hex'), v.aad_hex, v.name);
    const plaintext = encodePlaintext(v.position);
    assert.equal(new TextDecoder().decode(plaintext), v.plaintext, v.name);
    assert.equal(plaintext.length, v.plaintext_bytes, v.name);
    assert.deepEqual(await open(key, v.kid, v.seq, v.status, v.sealed), v.position, v.name);
    assert.equal(await _testing.sealWithNonce(key, v.kid, v.seq, v.status, v.position, base64urlDecode(v.nonce)), v.sealed, v.name);
    // And the vector fails like any other update under another seq.
    await rejectsWith(open(key, v.kid, v.seq + 1, v.status, v.sealed), 'cannot_decrypt');
  }
  assert.ok(vectors.seal.some((v) => /[^\x00-\x7f]/.test(v.position.note ?? '')), 'a vector with a multi-byte note');
});

test('vectors: every member box opens, and wrapping with its nonce gives its bytes exactly', async () => {
  assert.ok(vectors.member_boxes.length >= 1);
  for (const v of vectors.member_boxes) {
    const ms = base64urlDecode(v.member_secret);
    assert.equal(Buffer.from(await memberWrapKey(ms)).toString('hex'), v.wrap_key_hex, v.name);
    assert.equal(Buffer.from(boxAssociatedData(v.kid, v.member)).toString('hex'), v.aad_hex, v.name);
    assert.deepEqual(await unwrapForMember(ms, v.kid, v.member, v.box), decodeKey(v.stream_key), v.name);
    assert.equal(await _testing.wrapWithNonce(ms, v.kid, v.member, decodeKey(v.stream_key), base64urlDecode(v.nonce)), v.box, v.name);
  }
});

test('without a global WebCrypto (Node 18), the module falls back to node:crypto', () => {
  const script = `
    if (globalThis.crypto !== undefined) throw new Error('the global WebCrypto is still there');
    const m = await import(${JSON.stringify(new URL('../src/e2e.js', import.meta.url).href)});
    const { key, kid } = await m.newStreamKey();
    const p = await m.open(key, kid, 1, 'red', await m.seal(key, kid, 1, 'red', { lat: 1, lon: 2 }));
    console.log(JSON.stringify(p));`;
  // A file, not -e: node's eval puts its built-in modules (crypto among them) on the global object.
  const dir = mkdtempSync(join(tmpdir(), 'vigil-e2e-'));
  try {
    writeFileSync(join(dir, 'fallback.mjs'), script);
    const out = execFileSync(process.execPath, ['--no-experimental-global-webcrypto', join(dir, 'fallback.mjs')], { encoding: 'utf8' });
    assert.equal(out.trim(), '{"lat":1,"lon":2}');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
