// Starting a panic stream from this browser's location: the first fix, the start, and what the
// /panic page keeps to resume it (localStorage `vigil.panic`). Used by /panic and by /circle,
// which starts a stream for a circle and hands it over to /panic's sharing view.

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
export async function startHere(client, { status, watchers, note, dueInS, circle }) {
  const c = (await firstFix()).coords;
  const fields = { status, lat: c.latitude, lon: c.longitude, watchers };
  if (Number.isFinite(c.accuracy)) fields.accuracy_m = Math.min(100000, c.accuracy);
  if (note) fields.note = note;
  if (dueInS) fields.due_in_s = dueInS;
  const owner = circle ? await circle.startPanic(fields) : await client.startPanic(fields);
  savePanic(owner);
  return owner;
}

export function savePanic(owner) {
  localStorage.setItem(PANIC_KEY, JSON.stringify({ stream: owner.stream, ownerToken: owner.ownerToken, watchTokens: owner.watchTokens, circle: owner.circle ?? null }));
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
