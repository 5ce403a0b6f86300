// Turns a geolocation feed into panic.update at a bounded rate.

/** A browser GeolocationPosition or a plain {lat, lon, accuracy_m?, heading?, speed_mps?}. */
function toUpdate(p) {
  const c = p && p.coords;
  if (c) {
    const u = { lat: c.latitude, lon: c.longitude };
    if (Number.isFinite(c.accuracy)) u.accuracy_m = Math.min(100000, c.accuracy);
    if (Number.isFinite(c.heading) && c.heading >= 0 && c.heading <= 360) u.heading = c.heading;
    if (Number.isFinite(c.speed) && c.speed >= 0 && c.speed <= 1000) u.speed_mps = c.speed;
    return u;
  }
  return p;
}

/**
 * Sends the positions of `source` to `owner` as panic.update, at most one every `minIntervalMs`
 * (the newest position wins; one is never sent while the previous is unanswered). `source` is a
 * Geolocation (`navigator.geolocation`) or a function `(onPosition, onError) => stop`.
 * Returns `stop()`.
 */
export function followPosition(owner, source, { minIntervalMs = 1000, onError, onSent, geolocationOptions } = {}) {
  let pending = null;
  let lastSentAt = -Infinity;
  let inFlight = false;
  let timer = null;
  let stopped = false;

  const pump = () => {
    timer = null;
    if (stopped || inFlight || !pending) return;
    const wait = lastSentAt + minIntervalMs - Date.now();
    if (wait > 0) {
      timer = setTimeout(pump, wait);
      return;
    }
    const update = pending;
    pending = null;
    inFlight = true;
    lastSentAt = Date.now();
    owner.update(update).then(
      (seq) => { inFlight = false; onSent?.(seq, update); pump(); },
      (err) => { inFlight = false; onError?.(err); pump(); },
    );
  };

  const onPosition = (p) => {
    if (stopped) return;
    pending = toUpdate(p);
    if (!timer) pump();
  };

  let stopSource;
  if (source && typeof source.watchPosition === 'function') {
    const id = source.watchPosition(onPosition, (e) => onError?.(e), geolocationOptions ?? { enableHighAccuracy: true, maximumAge: 0 });
    stopSource = () => source.clearWatch(id);
  } else if (typeof source === 'function') {
    stopSource = source(onPosition, (e) => onError?.(e));
  } else {
    throw new TypeError('source must be a Geolocation or a function (onPosition, onError) => stop');
  }

  return function stop() {
    stopped = true;
    clearTimeout(timer);
    if (typeof stopSource === 'function') stopSource();
  };
}
