// /map: the live map. Pins in view (re-subscribing as the map pans and zooms), create, vote,
// edit and delete one's own (edit tokens kept in this browser's localStorage), time left.
import { VigilClient, MapModel } from './vigil/index.js';
import { siteConfig, createMap, serverURL, duration, text, show, reconnectWhenBack } from './mapview.js';

const TOKENS = 'vigil.edit_tokens';
const COLOURS = { general: '#1565c0', sighting: '#2e7d32', hazard: '#c62828', help: '#ef8f00', social: '#6a1b9a' };

const tokens = JSON.parse(localStorage.getItem(TOKENS) || '{}');
const saveTokens = () => localStorage.setItem(TOKENS, JSON.stringify(tokens));

let client;
let model;
let map = null;
let editing = null;
const markers = new Map();
// Without Leaflet: the area from #bbox=s,w,n,e, or the whole world.
let fixedArea = { bbox: [-90, -180, 90, 180] };

function problem(message) {
  text('problem', message);
  show('problem', !!message);
}

function currentArea() {
  if (!map) return fixedArea;
  const b = map.getBounds();
  const clamp = (v, lo, hi) => Math.min(hi, Math.max(lo, v));
  let west = b.getWest();
  let east = b.getEast();
  if (east - west >= 360) { west = -180; east = 180; }
  const wrap = (lon) => ((((lon + 180) % 360) + 360) % 360) - 180;
  return { bbox: [clamp(b.getSouth(), -90, 90), east - west >= 360 ? -180 : wrap(west), clamp(b.getNorth(), -90, 90), east - west >= 360 ? 180 : wrap(east)] };
}

let subscribeTimer = null;
function resubscribe() {
  clearTimeout(subscribeTimer);
  subscribeTimer = setTimeout(() => {
    client.subscribe(currentArea()).catch((err) => problem(`Cannot load the pins: ${err.message}`));
  }, 250);
}

function timeLeft(pin) {
  return `${duration(MapModel.timeLeftMs(pin))} left`;
}

function button(label, action, cls) {
  const b = document.createElement('button');
  b.type = 'button';
  b.textContent = label;
  b.dataset.action = cls;
  b.addEventListener('click', action);
  return b;
}

async function act(promise, what) {
  try {
    await promise;
    problem('');
  } catch (err) {
    problem(`${what}: ${err.message}`);
  }
}

function pinItem(pin) {
  const li = document.createElement('li');
  li.dataset.id = pin.id;
  const title = document.createElement('div');
  title.className = 'title';
  title.textContent = pin.title;
  const meta = document.createElement('div');
  meta.className = 'meta';
  const left = document.createElement('span');
  left.className = 'left';
  left.textContent = timeLeft(pin);
  meta.append(`${pin.category} · ▲ ${pin.up} ▼ ${pin.down} · `, left);
  li.append(title, meta);
  if (pin.description) {
    const d = document.createElement('div');
    d.textContent = pin.description;
    li.append(d);
  }
  li.append(
    button('▲', () => act(client.request('pin.vote', { id: pin.id, value: 1 }), 'Vote'), 'up'),
    button('▼', () => act(client.request('pin.vote', { id: pin.id, value: -1 }), 'Vote'), 'down'),
  );
  if (tokens[pin.id]) {
    li.append(
      button('Edit', () => startEdit(pin), 'edit'),
      button('Delete', () => act(client.request('pin.delete', { id: pin.id, edit_token: tokens[pin.id] }).then(() => { delete tokens[pin.id]; saveTokens(); }), 'Delete'), 'delete'),
    );
  }
  return li;
}

function render() {
  const list = document.getElementById('pins');
  const pins = [...model.pins.values()].sort((a, b) => b.created_at - a.created_at);
  list.replaceChildren(...pins.map(pinItem));
  text('count', `${pins.length} pin${pins.length === 1 ? '' : 's'} in view${model.truncated ? ' (newest only)' : ''}`);
  if (map) {
    const L = globalThis.L;
    for (const [id, marker] of markers) {
      if (!model.pins.has(id)) { marker.remove(); markers.delete(id); }
    }
    for (const pin of pins) {
      const colour = COLOURS[pin.category] ?? '#455a64';
      let marker = markers.get(pin.id);
      if (!marker) {
        marker = L.circleMarker([pin.lat, pin.lon], { radius: 8, color: '#fff', weight: 2, fillColor: colour, fillOpacity: 0.9 }).addTo(map);
        markers.set(pin.id, marker);
      }
      marker.setLatLng([pin.lat, pin.lon]).setStyle({ fillColor: colour });
      marker.unbindTooltip().bindTooltip(pin.title);
    }
  }
}

function tickTimes() {
  for (const li of document.querySelectorAll('#pins li')) {
    const pin = model.pins.get(li.dataset.id);
    const left = li.querySelector('.left');
    if (pin && left) left.textContent = timeLeft(pin);
  }
}

function startEdit(pin) {
  editing = pin;
  document.getElementById('pin-title').value = pin.title;
  document.getElementById('pin-description').value = pin.description;
  document.getElementById('pin-category').value = pin.category;
  // Editing keeps the time left unless a new duration is chosen.
  const ttl = document.getElementById('pin-ttl');
  if (!ttl.querySelector('option[value=""]')) ttl.prepend(Object.assign(document.createElement('option'), { value: '', textContent: 'keep time left' }));
  ttl.value = '';
  text('form-title', 'Edit your pin');
  text('pin-submit', 'Save');
  show('pin-cancel', true);
}

function stopEdit() {
  editing = null;
  document.getElementById('pin-ttl').querySelector('option[value=""]')?.remove();
  document.getElementById('pin-form').reset();
  text('form-title', "New pin at the map's centre");
  text('pin-submit', 'Add pin');
  show('pin-cancel', false);
}

async function submit(event) {
  event.preventDefault();
  const fields = {
    title: document.getElementById('pin-title').value,
    description: document.getElementById('pin-description').value,
    category: document.getElementById('pin-category').value,
  };
  const ttl = document.getElementById('pin-ttl').value;
  if (ttl) fields.ttl_s = Number(ttl);
  try {
    if (editing) {
      await client.request('pin.update', { id: editing.id, edit_token: tokens[editing.id], changes: fields });
      text('form-status', 'Saved.');
      stopEdit();
    } else {
      let lat = 0;
      let lon = 0;
      if (map) ({ lat, lng: lon } = map.getCenter().wrap());
      else if (fixedArea.bbox) { lat = (fixedArea.bbox[0] + fixedArea.bbox[2]) / 2; lon = (fixedArea.bbox[1] + fixedArea.bbox[3]) / 2; }
      const reply = await client.request('pin.create', { pin: { ...fields, lat, lon } });
      tokens[reply.pin.id] = reply.edit_token;
      saveTokens();
      document.getElementById('pin-form').reset();
      text('form-status', 'Added. Only this browser can edit or delete it.');
      render();
    }
    problem('');
  } catch (err) {
    text('form-status', err.field ? `${err.field}: ${err.message}` : err.message);
  }
}

/**
 * Where the map opens: `#at=lat,lon` or `#at=lat,lon,zoom` in the URL, else the server's
 * `web.map_center` and `web.map_zoom` (from /site.json).
 */
function initialView(hash, site) {
  const view = (hash.get('at') || '').split(',').map(Number);
  const fallback = { center: site.map_center ?? [52.52, 13.405], zoom: site.map_zoom ?? 13 };
  if ((view.length !== 2 && view.length !== 3) || !view.every(Number.isFinite)) return fallback;
  return { center: [view[0], view[1]], zoom: view.length === 3 ? view[2] : fallback.zoom };
}

async function main() {
  const hash = new URLSearchParams(location.hash.slice(1));
  const bbox = (hash.get('bbox') || '').split(',').map(Number);
  if (bbox.length === 4 && bbox.every(Number.isFinite)) fixedArea = { bbox };
  const site = await siteConfig();
  map = await createMap(document.getElementById('map'), site, initialView(hash, site));
  globalThis.vigilLeaflet = map;
  if (map) document.getElementById('map').classList.add('crosshair');
  client = new VigilClient(serverURL(), { heartbeatMs: 20000, reconnect: { minDelayMs: 300, maxDelayMs: 5000 } });
  globalThis.vigilClient = client;
  reconnectWhenBack(client);
  model = new MapModel(client);
  globalThis.vigilMap = model;
  model.on('change', render);
  client.on('open', () => { text('connection', 'live'); document.getElementById('connection').classList.remove('down'); });
  client.on('disconnected', () => { text('connection', 'connection lost – reconnecting…'); document.getElementById('connection').classList.add('down'); });
  const welcome = await client.connect();
  const select = document.getElementById('pin-category');
  select.replaceChildren(...welcome.limits.categories.map((c) => Object.assign(document.createElement('option'), { value: c, textContent: c })));
  document.getElementById('pin-form').addEventListener('submit', submit);
  document.getElementById('pin-cancel').addEventListener('click', stopEdit);
  if (map) map.on('moveend', resubscribe);
  // Cut off by a reconnect, the subscription is sent again by the client; the map fills then.
  await client.subscribe(currentArea()).catch((err) => { if (err.code !== 'disconnected') throw err; });
  setInterval(tickTimes, 1000);
  document.body.dataset.ready = 'true';
}

main().catch((err) => problem(`Something went wrong: ${err.message}`));
