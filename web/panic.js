// /panic: start a panic stream from a phone's browser (Geolocation API), hand out the watch
// links, send the position until "I am safe". The owner token stays in this browser's
// localStorage so that a reload (or a dead battery and a new tab) resumes the stream.
import { VigilClient, followPosition } from './vigil/index.js';
import { serverURL, text, show, reconnectWhenBack } from './mapview.js';

const KEY = 'vigil.panic';
let client;
let owner = null;
let stopFeed = null;
let status = 'red';

function problem(message) {
  text('problem', message);
  show('problem', !!message);
}

function firstFix() {
  return new Promise((resolve, reject) => {
    if (!navigator.geolocation) { reject(new Error('this browser has no location service')); return; }
    navigator.geolocation.getCurrentPosition(resolve, (e) => reject(new Error(e.message || 'location refused')),
      { enableHighAccuracy: true, timeout: 20000, maximumAge: 0 });
  });
}

function link(token) {
  return `${location.origin}/watch#s=${encodeURIComponent(owner.stream)}&t=${encodeURIComponent(token)}`;
}

function showLinks() {
  const list = document.getElementById('links');
  list.replaceChildren(...owner.watchTokens.map((token) => {
    const li = document.createElement('li');
    const input = Object.assign(document.createElement('input'), { readOnly: true, value: link(token) });
    const copy = Object.assign(document.createElement('button'), { type: 'button', textContent: navigator.share ? 'Share' : 'Copy' });
    copy.addEventListener('click', async () => {
      try {
        if (navigator.share) await navigator.share({ title: 'My live location', url: input.value });
        else await navigator.clipboard.writeText(input.value);
      } catch { input.select(); }
    });
    li.append(input, copy);
    return li;
  }));
}

function showStatus() {
  document.body.classList.toggle('status-red', status === 'red');
  document.body.classList.toggle('status-amber', status === 'amber');
  text('status', status === 'red' ? 'RED – in danger' : 'AMBER – uneasy');
  text('toggle', status === 'red' ? 'Switch to amber' : 'Switch to red');
}

// The safety timer (walk-me-home): the deadline as the server keeps it, moved on by "+15 minutes".
function showTimer() {
  const due = owner?.dueAt ?? null;
  show('walk', due !== null);
  text('due', due ? new Date(due).toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' }) : '–');
}

async function extendTimer() {
  // From the later of now and the current deadline: "+15" after a deadline passed starts afresh.
  const base = Math.max(Date.now(), owner.dueAt ?? 0);
  const dueInS = Math.round((base + 15 * 60000 - Date.now()) / 1000);
  try {
    await owner.setTimer({ due_in_s: dueInS });
    showTimer();
  } catch (err) {
    problem(`Not extended: ${err.message}`);
  }
}

function save() {
  localStorage.setItem(KEY, JSON.stringify({ stream: owner.stream, ownerToken: owner.ownerToken, watchTokens: owner.watchTokens }));
}

function sharing() {
  save();
  show('start', false);
  show('sharing', true);
  showLinks();
  showStatus();
  showTimer();
  show('missed', !!owner.escalated);
  owner.on('missedCheckIn', () => {
    status = 'red';
    showStatus();
    showTimer();
    show('missed', true);
  });
  owner.on('watchers', (n) => text('seen', n === 0 ? 'nobody is watching right now' : `seen by ${n} ${n === 1 ? 'person' : 'people'}`));
  stopFeed = followPosition(owner, navigator.geolocation, {
    minIntervalMs: 2000,
    onSent: (seq, u) => {
      text('sent', new Date().toLocaleTimeString());
      if (Number.isFinite(u.accuracy_m)) text('accuracy', `± ${Math.round(u.accuracy_m)} m`);
    },
    onError: (err) => problem(err.code === 'stream_ended' ? 'This sharing has ended.' : `Location not sent: ${err.message}`),
  });
}

async function start(chosen, dueInS = null) {
  status = chosen;
  problem('');
  try {
    const fix = await firstFix();
    const c = fix.coords;
    const fields = { status, lat: c.latitude, lon: c.longitude, watchers: Number(document.getElementById('contacts').value) };
    if (Number.isFinite(c.accuracy)) fields.accuracy_m = Math.min(100000, c.accuracy);
    const note = document.getElementById('note').value.trim();
    if (note) fields.note = note;
    if (dueInS) fields.due_in_s = dueInS;
    owner = await client.startPanic(fields);
    globalThis.vigilOwner = owner;
    sharing();
  } catch (err) {
    problem(`Could not start: ${err.message}`);
  }
}

async function finish(reason) {
  if (!owner) return;
  try {
    await owner.end(reason);
    stopFeed?.();
    localStorage.removeItem(KEY);
    show('sharing', false);
    show('start', true);
    problem('');
    text('connection', reason === 'safe' ? 'ended: you are safe' : 'ended: cancelled');
    owner = null;
  } catch (err) {
    problem(`Not ended yet: ${err.message}. Try again.`);
  }
}

async function main() {
  client = new VigilClient(serverURL(), { heartbeatMs: 20000, reconnect: { minDelayMs: 300, maxDelayMs: 5000 } });
  globalThis.vigilClient = client;
  reconnectWhenBack(client);
  client.on('open', () => text('connection', 'live'));
  client.on('disconnected', () => text('connection', 'connection lost – reconnecting…'));
  await client.connect();
  document.getElementById('start-form').addEventListener('submit', (e) => { e.preventDefault(); start('red'); });
  document.getElementById('start-amber').addEventListener('click', () => start('amber'));
  document.getElementById('start-walk').addEventListener('click', () => start('amber', Math.round(Number(document.getElementById('walk-minutes').value) * 60)));
  document.getElementById('extend').addEventListener('click', extendTimer);
  document.getElementById('stop-timer').addEventListener('click', async () => {
    try {
      await owner.cancelTimer();
      showTimer();
    } catch (err) {
      problem(`Not changed: ${err.message}`);
    }
  });
  document.getElementById('safe').addEventListener('click', () => finish('safe'));
  document.getElementById('cancel').addEventListener('click', () => finish('cancelled'));
  document.getElementById('toggle').addEventListener('click', async () => {
    const next = status === 'red' ? 'amber' : 'red';
    try {
      await owner.setStatus(next);
      status = next;
      showStatus();
    } catch (err) {
      problem(`Not changed: ${err.message}`);
    }
  });
  const saved = JSON.parse(localStorage.getItem(KEY) || 'null');
  if (saved) {
    try {
      owner = await client.resumePanic(saved.stream, saved.ownerToken);
      owner.watchTokens = saved.watchTokens;
      globalThis.vigilOwner = owner;
      status = owner.status;
      if (owner.ended) { localStorage.removeItem(KEY); owner = null; } else sharing();
    } catch {
      localStorage.removeItem(KEY);
    }
  }
  document.body.dataset.ready = 'true';
}

main().catch((err) => problem(`Something went wrong: ${err.message}`));
