// /panic: start a panic stream from a phone's browser (Geolocation API), hand out the watch
// links, send the position until "I am safe". The owner token stays in this browser's
// localStorage so that a reload (or a dead battery and a new tab) resumes the stream. A stream
// started for a check-in circle on /circle is handed over here the same way.
import { VigilClient, followPosition, watchLink } from './vigil/index.js';
import { serverURL, text, show, linkField, reconnectWhenBack } from './mapview.js';
import { startHere, savePanic, savedPanic, forgetPanic, savedKeys } from './panicstart.js';

let client;
let owner = null;
let stopFeed = null;
let status = 'red';

function problem(message) {
  text('problem', message);
  show('problem', !!message);
}

// An e2e stream's link carries its key in the fragment (`&k=`), which no browser sends to a server.
function link(token) {
  return watchLink(location.origin, owner.stream, token, owner.e2e?.key ?? null);
}

function showLinks() {
  const list = document.getElementById('links');
  list.replaceChildren(...owner.watchTokens.map((token) => {
    const li = document.createElement('li');
    li.append(...linkField(link(token), 'My live location'));
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

function sharing() {
  savePanic(owner);
  show('start', false);
  show('sharing', true);
  show('for-circle', !!owner.circle);
  if (owner.circle) document.querySelector('#for-circle a').href = `/circle#circle=${encodeURIComponent(owner.circle)}`;
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
    owner = await startHere(client, {
      status, dueInS, watchers: Number(document.getElementById('contacts').value), note: document.getElementById('note').value.trim(),
      e2e: document.getElementById('e2e').checked,
    });
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
    forgetPanic();
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
  const saved = savedPanic();
  if (saved) {
    try {
      const keys = savedKeys(saved);
      owner = await client.resumePanic(saved.stream, saved.ownerToken, keys ? { e2e: keys } : {});
      owner.watchTokens = saved.watchTokens;
      owner.circle = saved.circle ?? null;
      globalThis.vigilOwner = owner;
      status = owner.status;
      if (owner.ended) { forgetPanic(); owner = null; } else sharing();
    } catch {
      forgetPanic();
    }
  }
  document.body.dataset.ready = 'true';
}

main().catch((err) => problem(`Something went wrong: ${err.message}`));
