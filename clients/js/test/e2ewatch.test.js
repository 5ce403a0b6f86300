// The watch page's e2e logic without a DOM or a server (src/e2ewatch.js).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { E2EWatchView, watchLink, CANNOT_DECRYPT, KEY_NOTICES } from '../src/e2ewatch.js';
import { newStreamKey, seal, encodeKey, keyFromFragment, base64urlDecode, base64urlEncode } from '../src/e2e.js';

const here = { lat: 52.52, lon: 13.405, accuracy_m: 9, note: 'U-Bahn' };

async function point(key, kid, seq, status = 'red', position = here) {
  return { sealed: await seal(key, kid, seq, status, position), kid, seq, status };
}

test('the right key opens every point, and no notice is shown', async () => {
  const { key, kid } = await newStreamKey();
  const view = new E2EWatchView(`#s=S&t=T&k=${encodeKey(key)}`);
  assert.equal(view.notice, null);
  for (let seq = 1; seq <= 3; seq++) assert.deepEqual(await view.point(await point(key, kid, seq)), { ok: true, position: here });
  assert.equal(view.notice, null);
});

test('a tampered point, or one replayed under another seq or status, is "cannot decrypt", never a position, and the key is not blamed', async () => {
  const { key, kid } = await newStreamKey();
  const view = new E2EWatchView(`#s=S&t=T&k=${encodeKey(key)}`);
  const good = await point(key, kid, 1);
  assert.equal((await view.point(good)).ok, true);
  const bytes = base64urlDecode(good.sealed);
  bytes[20] ^= 1;
  for (const bad of [{ ...good, sealed: base64urlEncode(bytes) }, { ...good, seq: 2 }, { ...good, status: 'amber' }]) {
    const shown = await view.point(bad);
    assert.deepEqual(shown, { ok: false, label: CANNOT_DECRYPT });
    assert.equal('position' in shown, false);
  }
  assert.equal(view.notice, null);
});

test('a missing key is said once, and no point is shown', async () => {
  const { key, kid } = await newStreamKey();
  const view = new E2EWatchView('#s=S&t=T');
  assert.equal(view.notice, KEY_NOTICES.absent);
  assert.equal(view.noticeChanged, true);
  assert.deepEqual(await view.point(await point(key, kid, 1)), { ok: false, label: CANNOT_DECRYPT });
  assert.equal(view.noticeChanged, false);
  assert.equal(view.notice, KEY_NOTICES.absent);
});

test('a damaged key is said once', () => {
  const view = new E2EWatchView('#s=S&t=T&k=abc');
  assert.equal(view.notice, KEY_NOTICES.invalid);
});

test('a wrong key: said once, at the first point, then every point is "cannot decrypt"', async () => {
  const { key, kid } = await newStreamKey();
  const other = await newStreamKey();
  const view = new E2EWatchView(`#k=${encodeKey(other.key)}`);
  assert.equal(view.notice, null);
  assert.deepEqual(await view.point(await point(key, kid, 1)), { ok: false, label: CANNOT_DECRYPT });
  assert.equal(view.notice, KEY_NOTICES.wrong);
  assert.equal(view.noticeChanged, true);
  assert.deepEqual(await view.point(await point(key, kid, 2)), { ok: false, label: CANNOT_DECRYPT });
  assert.equal(view.noticeChanged, false);
});

test('a rekey this link has no key for is said once; points under the old kid still open', async () => {
  const first = await newStreamKey();
  const second = await newStreamKey();
  const view = new E2EWatchView(`#k=${encodeKey(first.key)}`);
  assert.equal((await view.point(await point(first.key, first.kid, 1))).ok, true);
  assert.equal((await view.point(await point(second.key, second.kid, 2))).ok, false);
  assert.equal(view.notice, KEY_NOTICES.rekeyed);
  assert.equal((await view.point(await point(first.key, first.kid, 1))).ok, true);
});

test('/panic: the watch link carries k only for an encrypted stream, and /watch reads it back', async () => {
  const { key } = await newStreamKey();
  assert.equal(watchLink('https://v.example', 'S 1', 'T/2'), 'https://v.example/watch#s=S%201&t=T%2F2');
  const link = watchLink('https://v.example', 'S', 'T', key);
  assert.match(link, /^https:\/\/v\.example\/watch#s=S&t=T&k=[A-Za-z0-9_-]{43}$/);
  assert.deepEqual(keyFromFragment(new URL(link).hash), { state: 'ok', key });
});
