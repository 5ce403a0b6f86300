// Independent client #2: Debian's node-ws against vigild's /echo.
// Usage: node node_echo_client.js ws://127.0.0.1:PORT/echo
//        node node_echo_client.js wss://localhost:PORT/echo CA.pem   (TLS, trusting the test CA)
// Prints one JSON line {"ok":true,...} and exits 0 on success; prints the reason and
// exits 1 on any mismatch, 2 on the overall deadline.
'use strict';
let WebSocket;
try { WebSocket = require('ws'); } catch (e) { WebSocket = require('/usr/share/nodejs/ws'); }

const url = process.argv[2];
const ca = process.argv[3] ? require('fs').readFileSync(process.argv[3]) : undefined;
const deadline = setTimeout(() => { console.log(JSON.stringify({ ok: false, error: 'deadline (10 s)' })); process.exit(2); }, 10000);

function fail(msg) {
  console.log(JSON.stringify({ ok: false, error: msg }));
  process.exit(1);
}

// Text, binary and boundary-sized messages; each must come back with the same type and bytes.
const big = Buffer.alloc(70000 - 4500); for (let i = 0; i < big.length; i++) big[i] = i & 0xff;
const messages = [
  { data: 'hello from node', binary: false },
  { data: 'ünïcödé ✓ 🛰', binary: false },
  { data: '', binary: false },
  { data: Buffer.from([0, 1, 2, 253, 254, 255]), binary: true },
  { data: 'y'.repeat(126), binary: false },
  { data: big, binary: true },                           // 65500 bytes, 16-bit length
];

const ws = new WebSocket(url, { perMessageDeflate: false, ca });
let next = 0;
let pongs = 0;
ws.on('error', (e) => fail('socket error: ' + e.message));
ws.on('open', () => {
  ws.ping(Buffer.from('node-ping'));
  for (const m of messages) ws.send(m.data, { binary: m.binary });
});
ws.on('pong', (data) => {
  if (data.toString() !== 'node-ping') fail('pong payload ' + JSON.stringify(data.toString()));
  pongs++;
});
ws.on('message', (data, isBinary) => {
  const want = messages[next];
  if (!want) fail('unexpected extra message');
  const wantBuf = Buffer.isBuffer(want.data) ? want.data : Buffer.from(want.data, 'utf8');
  if (isBinary !== want.binary) fail(`message ${next}: binary=${isBinary}, want ${want.binary}`);
  if (!Buffer.from(data).equals(wantBuf)) fail(`message ${next}: ${data.length} bytes differ from ${wantBuf.length} sent`);
  next++;
  if (next === messages.length) ws.close(1000, 'node done');
});
ws.on('close', (code, reason) => {
  clearTimeout(deadline);
  if (next !== messages.length) fail(`closed (${code}) after ${next}/${messages.length} echoes`);
  if (code !== 1000) fail(`close code ${code}, want 1000`);
  if (pongs !== 1) fail(`pongs ${pongs}, want 1`);
  console.log(JSON.stringify({ ok: true, echoed: next, closeCode: code, reason: reason.toString() }));
  process.exit(0);
});
