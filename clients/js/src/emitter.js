// A minimal event emitter that works the same in browsers and Node (no dependency).

export class Emitter {
  #handlers = new Map();

  /** Calls `fn(payload)` on every `name`; returns a function that removes it. */
  on(name, fn) {
    let set = this.#handlers.get(name);
    if (!set) this.#handlers.set(name, (set = new Set()));
    set.add(fn);
    return () => this.off(name, fn);
  }

  /** Like `on`, for the next `name` only. */
  once(name, fn) {
    const off = this.on(name, (payload) => { off(); fn(payload); });
    return off;
  }

  off(name, fn) {
    this.#handlers.get(name)?.delete(fn);
  }

  /** Calls each handler of `name`; a handler that throws does not stop the others (reported on `error`). */
  emit(name, payload) {
    const set = this.#handlers.get(name);
    if (!set) return;
    for (const fn of [...set]) {
      try {
        fn(payload);
      } catch (err) {
        if (name !== 'error') this.emit('error', err);
      }
    }
  }
}
