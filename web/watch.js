// /watch#s=STREAM&t=WATCH_TOKEN: an SOS contact follows a panic stream. The stream id and token
// are read from the URL fragment, which the browser never sends to any server.
// /watch#stream=STREAM&circle=CIRCLE (a notification's link, or "Follow" on /circle): a member of
// the stream's check-in circle follows it with the member token this browser keeps for the circle.
// An end-to-end encrypted stream: the key is `k` in the fragment (a direct contact's link) or
// comes in the member's box, opened with the member secret this browser keeps; every update is
// opened here, one that does not open is listed as "cannot decrypt this update" and never drawn,
// and a missing or wrong key is said once. The key never leaves this page.
import { VigilClient, WatchModel, e2e } from './vigil/index.js';
import { siteConfig, createMap, serverURL, duration, text, show, reconnectWhenBack } from './mapview.js';
import { storedCircle } from './circles.js';

const STATUS = { red: 'RED – in danger', amber: 'AMBER – uneasy' };
const ENDED = { safe: 'Home safe: the person ended the sharing.', cancelled: 'Cancelled: the person stopped sharing.', abandoned: 'Ended: no news from the phone for a long time.' };

const params = new URLSearchParams(location.hash.slice(1));
const stream = params.get('s') ?? params.get('stream');
const token = params.get('t') ?? params.get('token');
const circle = params.get('circle');
// Opened from a notification (sw.js): the notice to acknowledge once the stream is shown.
const notice = params.get('notice');

let map = null;
let trailLine = null;
let dot = null;
let ring = null;
let centred = false;

function drawMap(model) {
  const L = globalThis.L;
  if (!map || !model.last) return;
  const colour = model.status === 'amber' ? '#ef8f00' : '#c62828';
  const here = [model.last.lat, model.last.lon];
  const points = model.trail.map((p) => [p.lat, p.lon]);
  if (!trailLine) trailLine = L.polyline(points, { color: colour, weight: 3, opacity: 0.7 }).addTo(map);
  else trailLine.setLatLngs(points).setStyle({ color: colour });
  const radius = Number.isFinite(model.last.accuracy_m) ? model.last.accuracy_m : 0;
  if (!ring) ring = L.circle(here, { radius, color: colour, weight: 1, fillOpacity: 0.1 }).addTo(map);
  else ring.setLatLng(here).setRadius(radius).setStyle({ color: colour });
  if (!dot) dot = L.circleMarker(here, { radius: 8, color: '#fff', weight: 2, fillColor: colour, fillOpacity: 1 }).addTo(map);
  else dot.setLatLng(here).setStyle({ fillColor: colour });
  if (!centred) {
    map.setView(here, 16);
    centred = true;
  } else if (!map.getBounds().pad(-0.2).contains(here)) {
    map.panTo(here);
  }
}

/** The e2e stream's notice about the key (said once: the element is set when it changes). */
function renderNotice(notice) {
  text('key-notice', notice ?? '');
  show('key-notice', !!notice);
}

/** One row per update of an e2e stream that did not open: its seq and time, never a position. */
function renderPoint(point) {
  if (point.ok || document.querySelector(`#undecryptable li[data-seq="${point.seq}"]`)) return;
  const li = document.createElement('li');
  li.className = 'undecryptable';
  li.dataset.seq = String(point.seq);
  li.textContent = `${point.label} (#${point.seq}, ${new Date(point.at).toLocaleTimeString()})`;
  document.getElementById('undecryptable').append(li);
  show('undecryptable-box', true);
}

function render(model) {
  document.body.classList.toggle('status-red', model.status === 'red');
  document.body.classList.toggle('status-amber', model.status === 'amber');
  text('status', STATUS[model.status] ?? '–');
  text('points', String(model.trail.length));
  text('note', model.note || '–');
  show('e2e-badge', model.e2e);
  if (model.last) {
    text('position', `${model.last.lat.toFixed(5)}, ${model.last.lon.toFixed(5)}`);
    text('accuracy', Number.isFinite(model.last.accuracy_m) ? `± ${Math.round(model.last.accuracy_m)} m` : 'unknown');
  }
  show('signal', model.stale && !model.ended);
  // The safety timer: when the person expects to check in, and whether they missed it.
  text('due', model.dueAt ? new Date(model.dueAt).toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' }) : '–');
  show('missed', !!model.escalated && !model.ended);
  const ended = document.getElementById('ended');
  ended.className = 'banner ' + (model.ended?.reason ?? '');
  text('ended', model.ended ? (ENDED[model.ended.reason] ?? 'Ended.') : '');
  show('ended', !!model.ended);
  show('revoked', model.revoked);
  tick(model);
  drawMap(model);
}

function tick(model) {
  const at = model.lastUpdateAt;
  text('updated', at ? `${duration(Date.now() - at)} ago` : '–');
}

function problem(message) {
  text('problem', message);
  show('problem', true);
}

/** `{watchToken}` from the link, `{memberToken}` kept for the link's circle, or a reason why not. */
function credential() {
  if (token) return { watchToken: token };
  if (!circle) return { missing: 'This link is incomplete: it must end with #s=…&t=… as it was sent to you.' };
  const kept = storedCircle(circle);
  if (!kept) return { missing: 'This browser holds no invitation to this circle: open the invitation link you were sent first, on this device.' };
  if (kept.role !== 'member') return { missing: 'This alarm is your own: you are the owner of this circle. Its members follow it; you share it from "Share my location".' };
  return { memberToken: kept.token, memberSecret: e2e.decodeKey(kept.ms), member: kept.member };
}

/** How this page opens an e2e stream's updates: the link's fragment, or the member's secret. */
function e2eSource(cred) {
  if (cred.memberToken) return cred.memberSecret ? { memberSecret: cred.memberSecret, member: cred.member } : '';
  return location.hash;
}

/** The tap on the notification was the member's "I have seen it": the circle is told who saw it. */
async function acknowledge(client, memberToken) {
  try {
    await client.ack(circle, { memberToken }, notice);
    text('acked', 'Your circle can see that you have seen this alarm.');
    show('acked', true);
  } catch (err) {
    // An old notice (past its time) or one of another circle: the stream is shown all the same.
    console.warn(`acknowledging the notice: ${err.message}`);
  }
}

async function main() {
  const cred = stream ? credential() : { missing: 'This link is incomplete: it must end with #s=…&t=… as it was sent to you.' };
  if (cred.missing) {
    problem(cred.missing);
    text('status', '–');
    return;
  }
  if (cred.memberToken) text('revoked', 'Your invitation to this circle was withdrawn: you no longer see this location.');
  const site = await siteConfig();
  map = await createMap(document.getElementById('map'), site);
  const client = new VigilClient(serverURL(), { heartbeatMs: 20000, reconnect: { minDelayMs: 300, maxDelayMs: 4000 } });
  globalThis.vigilClient = client;
  reconnectWhenBack(client);
  const up = () => { text('connection', 'live'); document.getElementById('connection').classList.remove('down'); };
  const down = () => { text('connection', 'connection lost – reconnecting…'); document.getElementById('connection').classList.add('down'); };
  client.on('open', up);
  client.on('disconnected', down);
  await client.connect();
  let model;
  try {
    model = await WatchModel.open(client, stream, cred.memberToken ? { memberToken: cred.memberToken } : cred, { e2e: e2eSource(cred) });
  } catch (err) {
    const forbidden = cred.memberToken
      ? 'This alarm cannot be opened: your invitation to the circle was withdrawn, or the sharing ended more than an hour ago.'
      : 'This link does not open any location (it was withdrawn, or the sharing ended more than an hour ago).';
    problem(err.code === 'forbidden' ? forbidden : `Cannot follow this location: ${err.message}`);
    text('status', '–');
    client.close();
    return;
  }
  globalThis.vigilWatch = model;
  // The reply's trail opens after the reply came: what opened (or not) before these listeners is
  // shown from the model, the rest as it comes (a point is listed once, by its seq).
  await model.settled();
  for (const p of model.points) renderPoint(p);
  renderNotice(model.notice);
  model.on('change', render);
  model.on('notice', renderNotice);
  model.on('point', renderPoint);
  render(model);
  if (notice && cred.memberToken) acknowledge(client, cred.memberToken);
  setInterval(() => tick(model), 1000);
}

main().catch((err) => problem(`Something went wrong: ${err.message}`));
