// What a watch page shows for an end-to-end encrypted stream (docs/design/e2e-streams.md, "The
// pages"), without a DOM or a server so node can test it: the key in the link's fragment, each
// sealed point opened or shown as "cannot decrypt this update" (never a position), a missing or
// wrong key said once, plainly; and, for /panic, the watch link with the key in its fragment.

import { keyFromFragment, open, encodeKey, unwrapForMember, E2EError } from './e2e.js';

/** The label of a point that does not open. */
export const CANNOT_DECRYPT = 'cannot decrypt this update';

/** The sentences for the page's one notice about the key. */
export const KEY_NOTICES = {
  absent: 'This link has no key, so this encrypted stream\u2019s positions cannot be shown. Ask for the full link.',
  invalid: 'This link\u2019s key is damaged (cut short or mistyped), so this encrypted stream\u2019s positions cannot be shown. Ask for the full link.',
  wrong: 'This link\u2019s key does not open this stream\u2019s updates. Ask for a new link.',
  rekeyed: 'The stream\u2019s key has changed and this link\u2019s key does not open the new one. Ask for a new link.',
  box: 'Your invitation\u2019s key does not open this stream\u2019s key, so its positions cannot be shown. Ask the owner for a new invitation.',
  nobox: 'This encrypted stream holds no key for you, so its positions cannot be shown. Ask the owner for a new invitation.',
};

/**
 * Opens a watched e2e stream's sealed points with the key from the page's fragment.
 *
 * `point(p)` takes `{sealed, kid, seq, status}` (a `panic.location`, a trail point, an
 * escalation's `last`) and resolves with `{ ok: true, position }` or `{ ok: false, label }`; the
 * `notice` getter holds the one sentence about the key to show, or null, and `noticeChanged`
 * says whether the last `point` call set it (so the page says it once).
 */
export class E2EWatchView {
  /**
   * `source`: the page's fragment (a string: `k` is read from it), or `{ key }` (a 32-byte
   * Uint8Array) for an app that keeps the key itself, or `{ memberSecret, member }` for a
   * circle member whose key comes in its box (`box()`).
   */
  constructor(source = '') {
    /** The key points are opened with, unless a box gave one for their kid. */
    this.key = null;
    this.notice = null;
    /** kid -> key opened from a member's box. */
    this.boxKeys = new Map();
    this.memberSecret = null;
    this.member = null;
    if (typeof source === 'string') {
      const k = keyFromFragment(source);
      if (k.state === 'ok') this.key = k.key;
      else this.notice = KEY_NOTICES[k.state];
    } else if (source?.key instanceof Uint8Array) {
      this.key = source.key;
    } else if (source?.memberSecret instanceof Uint8Array) {
      this.memberSecret = source.memberSecret;
      this.member = source.member ?? null;
    } else {
      this.notice = KEY_NOTICES.absent;
    }
    this.noticeChanged = this.notice !== null;
    /** kids this key has opened at least one point of. */
    this.openedKids = new Set();
  }

  /**
   * A member's box (`{box, member?, kid?}` or the box's text) from the watch reply or a rekey:
   * opened with the member secret under each of `kids` (the box names none) until one opens.
   * Resolves with true when it gave a key; otherwise the notice says the key is missing.
   */
  async box(box, kids) {
    this.noticeChanged = false;
    if (this.memberSecret === null) return false;
    const text = typeof box === 'string' ? box : box?.box;
    const member = (typeof box === 'object' && box !== null ? box.member : undefined) ?? this.member;
    if (typeof text !== 'string') {
      if (this.boxKeys.size === 0 && this.key === null) this.#setNotice(KEY_NOTICES.nobox);
      return false;
    }
    const candidates = [...new Set([box?.kid, ...kids].filter((k) => typeof k === 'string'))];
    for (const kid of candidates) {
      try {
        this.boxKeys.set(kid, await unwrapForMember(this.memberSecret, kid, member, text));
        if (this.notice === KEY_NOTICES.box || this.notice === KEY_NOTICES.nobox) this.#setNotice(null);
        return true;
      } catch (e) {
        if (!(e instanceof E2EError)) throw e;
      }
    }
    this.#setNotice(KEY_NOTICES.box);
    return false;
  }

  async point({ sealed, kid, seq, status }) {
    this.noticeChanged = false;
    const key = this.boxKeys.get(kid) ?? this.key;
    if (key === null) {
      if (this.notice === null) {
        if (this.openedKids.size > 0) this.#setNotice(KEY_NOTICES.rekeyed);
        else this.#setNotice(this.memberSecret !== null ? KEY_NOTICES.nobox : KEY_NOTICES.absent);
      }
      return { ok: false, label: CANNOT_DECRYPT };
    }
    try {
      const position = await open(key, kid, seq, status, sealed);
      this.openedKids.add(kid);
      if (this.notice === KEY_NOTICES.wrong || this.notice === KEY_NOTICES.rekeyed) this.#setNotice(null);
      return { ok: true, position };
    } catch (e) {
      if (!(e instanceof E2EError)) throw e;
      // A point under a kid this key opened before was tampered with or replayed: that point
      // only. A kid it never opened: the key is wrong for it (or the stream was rekeyed).
      if (!this.openedKids.has(kid) && this.notice === null) {
        this.#setNotice(this.openedKids.size === 0 ? KEY_NOTICES.wrong : KEY_NOTICES.rekeyed);
      }
      return { ok: false, label: CANNOT_DECRYPT };
    }
  }

  #setNotice(notice) {
    this.noticeChanged = this.notice !== notice;
    this.notice = notice;
  }
}

/** A watch link: `origin/watch#s=STREAM&t=TOKEN`, and `&k=KEY` (base64url) when the stream is encrypted. */
export function watchLink(origin, stream, token, key = null) {
  let link = `${origin}/watch#s=${encodeURIComponent(stream)}&t=${encodeURIComponent(token)}`;
  if (key !== null) link += `&k=${encodeKey(key)}`;
  return link;
}
