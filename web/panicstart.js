// Starting a panic stream from this browser's location: the first fix, the start, and what the
// /panic page keeps to resume it (localStorage `vigil.panic`). Used by /panic and by /circle,
// which starts a stream for a circle and hands it over to /panic's sharing view.
//
// An end-to-end encrypted stream (the default on /panic): the key stays on this device (kept
// with the owner token to resume) and goes to the contacts only in the watch links' fragment;
// a circle's stream carries a box per member whose secret this browser keeps (circles.js).
import { e2e as crypto } from './vigil/index.js';

export const PANIC_KEY = 'vigil.panic';

export function firstFix() {
  return new Promise((resolve, reject) => {
    if (!navigator.geolocation) { reject(new Error('this browser has no location service')); return; }
    navigator.geolocation.getCurrentPosition(resolve, (e) => reject(new Error(e.message || 'location refused')),
      { enableHighAccuracy: true, timeout: 20000, maximumAge: 0 });
  });
}

/**
 * Starts a stream at the browser's position: `{status, watchers, note?, dueInS?}`, through
 * `circle` (a Circle this browser owns) when given, else `client`. Resolves with the Owner, saved.
 */
export async function startHere(client, { status, watchers, note, dueInS, circle, e2e = false, memberSecrets }) {
  const c = (await firstFix()).coords;
  const fields = { status, lat: c.latitude, lon: c.longitude, watchers };
  if (Number.isFinite(c.accuracy)) fields.accuracy_m = Math.min(100000, c.accuracy);
  if (note) fields.note = note;
  if (dueInS) fields.due_in_s = dueInS;
  if (e2e) {
    fields.e2e = true;
    if (memberSecrets) fields.memberSecrets = memberSecrets;
  }
  const owner = circle ? await circle.startPanic(fields) : await client.startPanic(fields);
  savePanic(owner);
  return owner;
}

export function savePanic(owner) {
  const saved = { stream: owner.stream, ownerToken: owner.ownerToken, watchTokens: owner.watchTokens, circle: owner.circle ?? null };
  if (owner.e2e) saved.e2e = { key: crypto.encodeKey(owner.e2e.key), kid: owner.e2e.kid };
  localStorage.setItem(PANIC_KEY, JSON.stringify(saved));
}

/** The `{key, kid}` of a saved e2e stream, or null (none kept, or damaged). */
export function savedKeys(saved) {
  const key = crypto.decodeKey(saved?.e2e?.key);
  return key && crypto.isKid(saved.e2e.kid) ? { key, kid: saved.e2e.kid } : null;
}

/** A circle entry's member secrets (`ms` of the invitations this browser made): `Map(member -> bytes)`. */
export function memberSecretsOf(entry) {
  const out = new Map();
  for (const m of entry?.members ?? []) {
    const ms = crypto.decodeKey(m.ms);
    if (ms) out.set(m.member, ms);
  }
  return out;
}

export function savedPanic() {
  try {
    return JSON.parse(localStorage.getItem(PANIC_KEY) || 'null');
  } catch {
    return null;
  }
}

export function forgetPanic() {
  localStorage.removeItem(PANIC_KEY);
}
