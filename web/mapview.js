// The map of the pages: Leaflet when the server has it (/vendor/leaflet, Debian's libjs-leaflet),
// with the configured tiles or a plain background; without Leaflet, null (the pages show text).

export async function siteConfig() {
  try {
    const r = await fetch('/site.json', { cache: 'no-cache' });
    if (r.ok) return await r.json();
  } catch { /* offline, or an old server: defaults */ }
  return { tile_url: '', tile_attribution: '', leaflet: false };
}

/** Loads Leaflet from /vendor/leaflet when the server has it (no request for it otherwise). */
function loadLeaflet() {
  if (globalThis.L) return Promise.resolve(true);
  const css = Object.assign(document.createElement('link'), { rel: 'stylesheet', href: '/vendor/leaflet/leaflet.css' });
  document.head.prepend(css);
  return new Promise((resolve) => {
    const script = Object.assign(document.createElement('script'), { src: '/vendor/leaflet/leaflet.js' });
    script.onload = () => resolve(!!globalThis.L);
    script.onerror = () => resolve(false);
    document.head.append(script);
  });
}

export async function createMap(element, site, { center = [20, 0], zoom = 2 } = {}) {
  const loaded = site.leaflet && await loadLeaflet();
  const L = globalThis.L;
  if (!loaded || !L) {
    element.classList.add('nomap');
    element.textContent = 'No map on this server: positions are shown as text.';
    return null;
  }
  const map = L.map(element, { zoomControl: true, attributionControl: true }).setView(center, zoom);
  if (site.tile_url) {
    L.tileLayer(site.tile_url, { maxZoom: 19, attribution: site.tile_attribution || '' }).addTo(map);
  }
  return map;
}

/** `ws://host/v1` or `wss://host/v1` for the page's own origin. */
export function serverURL() {
  return (location.protocol === 'https:' ? 'wss://' : 'ws://') + location.host + '/v1';
}

/** "12 s", "4 min", "2 h 5 min". */
export function duration(ms) {
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 60) return `${s} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} min`;
  const h = Math.floor(m / 60);
  return m % 60 ? `${h} h ${m % 60} min` : `${h} h`;
}

export function text(id, value) {
  const el = document.getElementById(id);
  if (el && el.textContent !== value) el.textContent = value;
}

/**
 * A link to hand to someone: the link in a read-only field, and a button that opens the phone's
 * share sheet (or copies it where there is none). Returns `[input, button]`.
 */
export function linkField(url, title) {
  const input = Object.assign(document.createElement('input'), { readOnly: true, value: url });
  const button = Object.assign(document.createElement('button'), { type: 'button', textContent: navigator.share ? 'Share' : 'Copy' });
  button.addEventListener('click', async () => {
    try {
      if (navigator.share) await navigator.share({ title, url: input.value });
      else await navigator.clipboard.writeText(input.value);
    } catch { input.select(); }
  });
  return [input, button];
}

export function show(id, visible) {
  const el = document.getElementById(id);
  if (el) el.hidden = !visible;
}

/**
 * Reconnects at once when the browser says the network is back, or when a phone shows the page
 * again while it was still waiting out a backoff (timers of hidden tabs are throttled).
 */
export function reconnectWhenBack(client) {
  addEventListener('online', () => client.reconnectNow());
  document.addEventListener('visibilitychange', () => {
    if (document.visibilityState === 'visible' && !client.isOpen) client.reconnectNow();
  });
}
