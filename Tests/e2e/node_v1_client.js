// Independent client #2 on /v1: Debian's node-ws runs a live-map and a panic-stream exchange,
// over ws:// or wss:// (with the test CA), and checks every reply and event.
// Usage: node node_v1_client.js URL [CA.pem]
// Prints one JSON line {"ok":true,...} and exits 0; prints the reason and exits 1 on a mismatch,
// 2 on the overall deadline.
'use strict';
let WebSocket;
try { WebSocket = require('ws'); } catch (e) { WebSocket = require('/usr/share/nodejs/ws'); }

const url = process.argv[2];
const ca = process.argv[3] ? require('fs').readFileSync(process.argv[3]) : undefined;
const deadline = setTimeout(() => { console.log(JSON.stringify({ ok: false, error: 'deadline (15 s)' })); process.exit(2); }, 15000);

function fail(msg) {
  console.log(JSON.stringify({ ok: false, error: msg }));
  process.exit(1);
}

// A connection with request/reply by ref and a queue of events.
function open() {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, 'vigil.v1', { perMessageDeflate: false, ca });
    const c = { ws, refs: 0, waiting: new Map(), events: [], eventWaiters: [] };
    ws.on('error', (e) => fail('socket error: ' + e.message));
    ws.on('message', (data) => {
      const m = JSON.parse(data.toString());
      if (m.type === 'welcome') return resolve(c);
      if (m.ref !== undefined) {
        const w = c.waiting.get(m.ref);
        if (!w) fail('reply to an unknown ref: ' + data);
        c.waiting.delete(m.ref);
        return w(m);
      }
      c.events.push(m);
      const waiter = c.eventWaiters.shift();
      if (waiter) waiter(c.events.shift());
    });
    c.request = (body) => new Promise((res) => {
      const ref = ++c.refs;
      c.waiting.set(ref, res);
      ws.send(JSON.stringify(Object.assign({ ref }, body)));
    });
    c.ok = async (body) => {
      const m = await c.request(body);
      if (m.type !== 'ok') fail(body.op + ' failed: ' + JSON.stringify(m));
      return m;
    };
    c.event = () => new Promise((res) => {
      if (c.events.length) return res(c.events.shift());
      c.eventWaiters.push(res);
    });
  });
}

(async () => {
  // Live map: a subscriber sees a pin created, updated and deleted by another client.
  const sub = await open();
  const pub = await open();
  const subscribed = await sub.ok({ op: 'subscribe', area: { bbox: [48.80, 2.25, 48.90, 2.45] } });
  if (!Array.isArray(subscribed.pins)) fail('subscribe reply has no pins');
  const created = await pub.ok({ op: 'pin.create', pin: { lat: 48.8566, lon: 2.3522, title: 'node pin' } });
  let e = await sub.event();
  if (e.type !== 'pin.added' || e.pin.id !== created.pin.id || e.pin.title !== 'node pin') fail('added: ' + JSON.stringify(e));
  await pub.ok({ op: 'pin.update', id: created.pin.id, edit_token: created.edit_token, changes: { title: 'moved' } });
  e = await sub.event();
  if (e.type !== 'pin.updated' || e.pin.title !== 'moved') fail('updated: ' + JSON.stringify(e));
  await pub.ok({ op: 'pin.delete', id: created.pin.id, edit_token: created.edit_token });
  e = await sub.event();
  if (e.type !== 'pin.removed' || e.reason !== 'deleted') fail('removed: ' + JSON.stringify(e));

  // Panic: an owner streams three locations and ends; a watcher sees each seq in order.
  const owner = await open();
  const watcher = await open();
  const started = await owner.ok({ op: 'panic.start', status: 'red', lat: 48.85, lon: 2.35, watchers: 1 });
  const watching = await watcher.ok({ op: 'panic.watch', stream: started.stream, watch_token: started.watch_tokens[0] });
  if (watching.state.seq !== 1) fail('watch state: ' + JSON.stringify(watching));
  for (let i = 0; i < 3; i++) await owner.ok({ op: 'panic.update', stream: started.stream, lat: 48.85 + i / 1000, lon: 2.35 });
  await owner.ok({ op: 'panic.end', stream: started.stream, reason: 'safe' });
  const seqs = [];
  for (let i = 0; i < 4; i++) seqs.push(await watcher.event());
  if (JSON.stringify(seqs.map((m) => m.seq)) !== '[2,3,4,5]') fail('seqs: ' + JSON.stringify(seqs));
  if (seqs[3].type !== 'panic.ended' || seqs[3].reason !== 'safe') fail('end: ' + JSON.stringify(seqs[3]));

  for (const c of [sub, pub, owner, watcher]) c.ws.close(1000);
  clearTimeout(deadline);
  console.log(JSON.stringify({ ok: true, pinEvents: 3, panicEvents: seqs.length }));
  process.exit(0);
})().catch((err) => fail(String(err)));
