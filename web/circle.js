// /circle: check-in circles (docs/PROTOCOL.md, "Check-in circles"). The owner makes a circle,
// hands each member their own invitation link, answers "I am safe", sets "home safe" and can raise
// an alarm for the circle; a member opens the link, asks "are you safe?", sees the answers and
// follows an alarm. Both can turn on notifications (Web Push, /sw.js).
//
// Links: /circle#circle=C&member=TOKEN is an invitation: the member's capability is in the
// fragment (never sent to a server), saved in this browser's localStorage (circles.js) and then
// removed from the visible URL. An invitation also carries the member's secret `ms` (32 bytes,
// base64url): the owner's browser keeps every member's, and a stream it starts for the circle is
// end-to-end encrypted with a box per member made from them; the member's browser keeps its own
// to open its box on /watch. Neither ever goes to a server. /circle#circle=C opens a circle this browser keeps (the link
// that a notification opens). /circle lists the circles kept here and makes new ones.
import { VigilClient, e2e } from './vigil/index.js';
import { siteConfig, serverURL, text, show, linkField, reconnectWhenBack } from './mapview.js';
import { storedCircles, storedCircle, storeCircle, forgetCircle, isToken } from './circles.js';
import { startHere, savedPanic, memberSecretsOf } from './panicstart.js';

let client;
let site;
let circle = null;   // the Circle shown
let entry = null;    // what this browser keeps of it

const time = (ms) => new Date(ms).toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' });
const who = (m) => (m.label ? m.label : `Member ${m.member}`);

function problem(message) {
  text('problem', message);
  show('problem', !!message);
}

function el(tag, props = {}, ...children) {
  const e = Object.assign(document.createElement(tag), props);
  e.append(...children);
  return e;
}

function inviteLink(id, token, ms) {
  const link = `${location.origin}/circle#circle=${encodeURIComponent(id)}&member=${encodeURIComponent(token)}`;
  return ms ? `${link}&ms=${ms}` : link;
}

/** Invited members as kept here: each with a new member secret (`ms`, base64url) for its link. */
async function withSecrets(members) {
  return Promise.all(members.map(async (m) => ({ ...m, ms: e2e.encodeKey(await e2e.newMemberSecret()) })));
}

/**
 * The circle the URL names. An invitation's member token is kept and the URL shown without it
 * (so a screenshot or a shared tab does not give it away). An owner opening a member's link on
 * their own browser stays the owner.
 */
function circleFromLink() {
  const params = new URLSearchParams(location.hash.slice(1));
  const id = params.get('circle');
  const member = params.get('member');
  if (!id) return null;
  if (member !== null) {
    if (!isToken(id) || !isToken(member)) {
      problem('This invitation link is damaged: open it again exactly as it was sent to you.');
      history.replaceState(null, '', '/circle');
      return null;
    }
    // The member secret, when the link has an intact one: it opens this member's key boxes.
    const ms = params.get('ms');
    if (storedCircle(id)?.role !== 'owner') storeCircle(id, { role: 'member', token: member, ...(e2e.decodeKey(ms) ? { ms } : {}) });
    history.replaceState(null, '', `/circle#circle=${encodeURIComponent(id)}`);
  }
  return id;
}

// MARK: rendering

function renderList() {
  show('home-list', true);
  show('circle', false);
  text('role', '');
  const kept = storedCircles();
  show('no-circles', kept.length === 0);
  document.getElementById('circles').replaceChildren(...kept.map(([id, e]) => el('li', {},
    el('a', { href: `/circle#circle=${encodeURIComponent(id)}`, textContent: e.role === 'owner' ? 'My circle' : `A circle I am in${e.label ? ` (as ${e.label})` : ''}` }),
    el('span', { className: 'muted', textContent: ` ${id.slice(0, 6)}…` }))));
}

function render() {
  if (!circle?.state) return;
  const s = circle.state;
  const owner = circle.role === 'owner';
  show('home-list', false);
  show('circle', true);
  text('role', owner ? 'you own this circle' : `you are ${s.you ? who(s.you) : 'a member'}`);
  show('you', !owner);
  if (s.you) text('you-label', who(s.you));
  show('owner-actions', owner);
  show('member-actions', !owner && circle.active);

  // Alarms: the circle's active panic streams; a member follows one on /watch with its token.
  const mine = savedPanic();
  document.getElementById('panics').replaceChildren(...circle.panics.map((p) => {
    const li = el('li', { className: `panic ${p.status}` });
    li.dataset.stream = p.stream;
    const label = p.status === 'red' ? 'RED – in danger' : 'AMBER – uneasy';
    li.append(el('span', { className: 'badge', textContent: label }),
      ` since ${time(p.started_at)}${p.escalated_at ? `, missed check-in at ${time(p.escalated_at)}` : ''} `);
    if (!owner) li.append(el('a', { className: 'follow', href: `/watch#stream=${encodeURIComponent(p.stream)}&circle=${encodeURIComponent(circle.id)}`, textContent: 'Follow' }));
    else if (mine?.stream === p.stream) li.append(el('a', { href: '/panic', textContent: 'Your alarm: open it' }));
    return li;
  }));
  show('panics-box', circle.panics.length > 0);
  const red = circle.panics.some((p) => p.status === 'red');
  text('alarm', owner ? 'Your alarm is on: your circle follows your location.' : (red ? 'Alarm: someone in your circle is in danger.' : 'Someone in your circle feels uneasy.'));
  show('alarm', circle.panics.length > 0);
  document.body.classList.toggle('status-red', red);

  text('answer', s.answer ? `Safe, answered at ${time(s.answer.at)}${s.answer.note ? `: “${s.answer.note}”` : ''}` : 'No answer yet.');
  text('home', s.home ? `Home safe until ${time(s.home.until)}` : '');
  show('home', !!s.home);
  show('home-clear', owner && !!s.home);
  const you = s.you?.member;
  document.getElementById('requests').replaceChildren(...(s.requests ?? []).map((r) => el('li', {
    textContent: `${r.member === you ? 'You' : who(r)} asked “are you safe?” at ${time(r.at)}`,
  })));

  if (owner) renderMembers(s);
  const push = !!entry?.push;
  show('notify-on', !push && circle.active);
  show('notify-off', push);
  text('notify-text', push ? 'Notifications are on for this circle on this device.'
    : 'Get a notification on this device when something happens in the circle, even with this page closed.');
}

function renderMembers(s) {
  const kept = new Map((entry?.members ?? []).map((m) => [m.member, m]));
  document.getElementById('members').replaceChildren(...(s.members ?? []).map((m) => {
    const li = el('li');
    li.dataset.member = String(m.member);
    li.append(el('strong', { textContent: who(m) }), ' ');
    const token = kept.get(m.member)?.token;
    if (token) {
      li.append(...linkField(inviteLink(circle.id, token, kept.get(m.member).ms), 'Join my check-in circle'));
    } else {
      li.append(el('span', { className: 'muted', textContent: 'link made on another device ' }));
    }
    const revoke = el('button', { type: 'button', className: 'revoke', textContent: 'Withdraw' });
    revoke.addEventListener('click', () => act(async () => {
      await circle.revoke(m.member);
      entry = storeCircle(circle.id, { members: (entry.members ?? []).filter((x) => x.member !== m.member) });
    }, 'Not withdrawn'));
    li.append(' ', revoke);
    return li;
  }));
}

/** Runs a user's action: its failure is shown, and the page drawn again either way. */
async function act(fn, what) {
  problem('');
  try {
    await fn();
  } catch (err) {
    problem(`${what}: ${err.message}`);
  }
  render();
}

// MARK: opening a circle

async function open(id) {
  entry = storedCircle(id);
  if (!entry) {
    problem('This browser holds no key to this circle. Open the invitation link you were sent, on this device.');
    renderList();
    return;
  }
  try {
    circle = entry.role === 'owner' ? await client.openCircle(id, entry.token) : await client.joinCircle(id, entry.token);
  } catch (err) {
    if (err.code === 'forbidden') {
      forgetCircle(id);
      problem(entry.role === 'owner' ? 'This circle no longer exists (it was closed, or unused for a long time).'
        : 'This invitation does not open the circle: it was withdrawn, or the circle was closed.');
    } else {
      problem(`Cannot open the circle: ${err.message}`);
    }
    renderList();
    return;
  }
  follow();
}

function follow() {
  globalThis.vigilCircle = circle;
  // The name the owner gave this member, for the list of circles kept here.
  if (circle.role === 'member' && circle.state?.you?.label) entry = storeCircle(circle.id, { label: circle.state.you.label });
  // The member's number: its key box is sealed for it.
  if (circle.role === 'member' && Number.isSafeInteger(circle.state?.you?.member)) entry = storeCircle(circle.id, { member: circle.state.you.member });
  circle.on('change', render);
  const gone = (message) => {
    forgetCircle(circle.id);
    entry = null;
    text('gone', message);
    show('gone', true);
    render();
  };
  circle.on('revoked', () => gone('Your invitation to this circle was withdrawn by its owner.'));
  circle.on('closed', (m) => gone(m.reason === 'idle' ? 'This circle was removed after a long time unused.' : 'The owner closed this circle.'));
  // Opened again after a reconnect and refused: withdrawn or closed while this page was away.
  circle.on('error', (err) => (err.code === 'forbidden'
    ? gone('This circle can no longer be opened: the invitation was withdrawn, or the circle was closed.')
    : problem(`The circle could not be opened again: ${err.message}`)));
  render();
}

async function create(event) {
  event.preventDefault();
  problem('');
  const labels = document.getElementById('create-members').value.split('\n').map((l) => l.trim()).filter(Boolean);
  try {
    circle = await client.createCircle(labels);
  } catch (err) {
    problem(`The circle was not made: ${err.message}`);
    return;
  }
  entry = storeCircle(circle.id, { role: 'owner', token: circle.ownerToken, members: await withSecrets(circle.memberTokens) });
  history.replaceState(null, '', `/circle#circle=${encodeURIComponent(circle.id)}`);
  follow();
}

// MARK: notifications (Web Push through /sw.js)

function keyBytes(base64url) {
  const b64 = base64url.replace(/-/g, '+').replace(/_/g, '/') + '='.repeat((4 - (base64url.length % 4)) % 4);
  return Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
}

function sameKey(buffer, bytes) {
  if (!buffer) return false;
  const a = new Uint8Array(buffer);
  return a.length === bytes.length && a.every((x, i) => x === bytes[i]);
}

class Unsupported extends Error {}

/** This device's push subscription for vigild's key (subscribing when it has none). */
async function pushSubscription() {
  if (!('serviceWorker' in navigator) || !('PushManager' in globalThis) || !('Notification' in globalThis)) {
    throw new Unsupported('This browser cannot receive notifications from a web page. Keep this page open to hear news here; on an iPhone, add the page to the home screen first.');
  }
  if (!site.push_public_key) throw new Unsupported('This server does not send notifications (Web Push is not set up on it).');
  const permission = await Notification.requestPermission();
  if (permission !== 'granted') throw new Unsupported('Notifications are blocked for this site: allow them in the browser’s settings, then try again.');
  const registration = await navigator.serviceWorker.register('/sw.js');
  await navigator.serviceWorker.ready;
  const key = keyBytes(site.push_public_key);
  let subscription = await registration.pushManager.getSubscription();
  if (subscription && !sameKey(subscription.options?.applicationServerKey, key)) {
    // Made for another key (the server's key changed): vigild could not send through it.
    await subscription.unsubscribe();
    subscription = null;
  }
  return subscription ?? registration.pushManager.subscribe({ userVisibleOnly: true, applicationServerKey: key });
}

async function notifyOn() {
  problem('');
  try {
    const subscription = await pushSubscription();
    const id = await circle.registerPush(subscription.toJSON());
    entry = storeCircle(circle.id, { push: { id, endpoint: subscription.endpoint } });
  } catch (err) {
    problem(err instanceof Unsupported ? err.message : `Notifications were not turned on: ${err.message}`);
  }
  render();
}

async function notifyOff() {
  problem('');
  const push = entry?.push;
  if (!push) return;
  try {
    await circle.unregister(push.id);
  } catch (err) {
    // forbidden / not_found: vigild no longer has it (removed after the push service said it
    // was gone); anything else is worth saying, and the subscription stays on.
    if (err.code !== 'forbidden' && err.code !== 'not_found') {
      problem(`Notifications were not turned off: ${err.message}`);
      render();
      return;
    }
  }
  entry = storeCircle(circle.id, { push: undefined });
  // The device's subscription goes too once no other circle kept here uses it.
  const shared = storedCircles().some(([id, e]) => id !== circle.id && e.push?.endpoint === push.endpoint);
  if (!shared && 'serviceWorker' in navigator) {
    const registration = await navigator.serviceWorker.getRegistration('/');
    const subscription = await registration?.pushManager.getSubscription();
    if (subscription?.endpoint === push.endpoint) await subscription.unsubscribe().catch(() => {});
  }
  render();
}

// MARK: start

async function main() {
  site = await siteConfig();
  client = new VigilClient(serverURL(), { heartbeatMs: 20000, reconnect: { minDelayMs: 300, maxDelayMs: 5000 } });
  globalThis.vigilClient = client;
  reconnectWhenBack(client);
  client.on('open', () => text('connection', 'live'));
  client.on('disconnected', () => text('connection', 'connection lost – reconnecting…'));

  document.getElementById('create-form').addEventListener('submit', create);
  document.getElementById('ask').addEventListener('click', () => act(async () => {
    await circle.request();
  }, 'Not asked'));
  document.getElementById('answer-form').addEventListener('submit', (e) => {
    e.preventDefault();
    act(async () => {
      const note = document.getElementById('answer-note').value.trim();
      circle.state.answer = await circle.answer({ note });
      circle.state.requests = [];
      document.getElementById('answer-note').value = '';
    }, 'Not answered');
  });
  document.getElementById('home-set').addEventListener('click', () => act(async () => {
    circle.state.home = await circle.home({ for_s: Number(document.getElementById('home-hours').value) * 3600 });
  }, 'Home safe not set'));
  document.getElementById('home-clear').addEventListener('click', () => act(async () => {
    await circle.home({ clear: true });
    delete circle.state.home;
  }, 'Home safe not cleared'));
  document.getElementById('invite-form').addEventListener('submit', (e) => {
    e.preventDefault();
    act(async () => {
      const label = document.getElementById('invite-label').value.trim();
      const [member] = await withSecrets([await circle.invite(label || null)]);
      entry = storeCircle(circle.id, { members: [...(entry.members ?? []), member] });
      document.getElementById('invite-label').value = '';
    }, 'Nobody invited');
  });
  for (const status of ['red', 'amber']) {
    document.getElementById(`panic-${status}`).addEventListener('click', async () => {
      problem('');
      try {
        // End-to-end encrypted, with a box for each member whose secret this browser keeps.
        await startHere(client, { status, watchers: 1, circle, e2e: true, memberSecrets: memberSecretsOf(entry) });
        location.assign('/panic');   // its sharing view resumes the stream this page started
      } catch (err) {
        problem(`Could not raise the alarm: ${err.message}`);
      }
    });
  }
  document.getElementById('notify-on').addEventListener('click', notifyOn);
  document.getElementById('notify-off').addEventListener('click', notifyOff);
  addEventListener('hashchange', () => location.reload());

  const id = circleFromLink();
  await client.connect();
  if (id) await open(id);
  else renderList();
  document.body.dataset.ready = 'true';
}

main().catch((err) => problem(`Something went wrong: ${err.message}`));
