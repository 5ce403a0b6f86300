// What this browser keeps of its check-in circles, in localStorage under `vigil.circles`, keyed by
// circle id: `{role: 'owner'|'member', token, label?, members?: [{member, label, token}], push?:
// {id, endpoint}}`. The token is the owner's or the member's capability: it never leaves this
// browser except to vigild, and a notification carries only the circle's id, by which the page
// it opens finds the token here.

const KEY = 'vigil.circles';

function all() {
  try {
    const value = JSON.parse(localStorage.getItem(KEY) || '{}');
    return value && typeof value === 'object' ? value : {};
  } catch {
    return {};
  }
}

/** Every circle kept here: `[[id, entry], ...]`. */
export function storedCircles() {
  return Object.entries(all());
}

/** The entry kept for circle `id`, or null. */
export function storedCircle(id) {
  return all()[id] ?? null;
}

/** Merges `changes` into the entry of circle `id` (making it if need be); returns the entry. */
export function storeCircle(id, changes) {
  const circles = all();
  circles[id] = { ...(circles[id] ?? {}), ...changes };
  localStorage.setItem(KEY, JSON.stringify(circles));
  return circles[id];
}

export function forgetCircle(id) {
  const circles = all();
  delete circles[id];
  localStorage.setItem(KEY, JSON.stringify(circles));
}

/** A circle id or token as vigild makes them: base64url. */
export const isToken = (s) => typeof s === 'string' && /^[A-Za-z0-9_-]{16,128}$/.test(s);
