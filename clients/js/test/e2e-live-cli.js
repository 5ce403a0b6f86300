// The JS client on a live e2e stream, from the command line, for the Swift client's interop
// tests (Tests/VigilClientTests/E2EStreamTests.swift, E2ELiveInteropTests):
//   node e2e-live-cli.js own URL
//     starts an e2e stream (red, at the first position read), prints {"stream","token","key","kid"}
//     as one line, then for each line of stdin (a position's JSON) sends a sealed update and
//     prints its seq; at the end of stdin ends the stream ("safe") and exits.
//   node e2e-live-cli.js watch URL STREAM TOKEN KEY LAST_SEQ
//     watches with a WatchModel and the key, and once it holds LAST_SEQ prints each point as one
//     line: {"seq","ok","position"|"label"}; exits 0.
// Uses the built-in WebSocket (Node 22+) or the ws package, as the library does.
import { createInterface } from 'node:readline';
import { VigilClient, WatchModel, e2e } from '../src/index.js';

const [command, url, ...rest] = process.argv.slice(2);
const client = new VigilClient(url, { reconnect: false, requestTimeoutMs: 10000 });
await client.connect();
const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();

if (command === 'own') {
  const first = JSON.parse((await lines.next()).value);
  const owner = await client.startPanic({ status: 'red', ...first, e2e: true });
  console.log(JSON.stringify({ stream: owner.stream, token: owner.watchTokens[0], key: e2e.encodeKey(owner.e2e.key), kid: owner.e2e.kid }));
  for (let line = await lines.next(); !line.done; line = await lines.next()) {
    if (line.value.trim() === '') continue;
    console.log(String(await owner.update(JSON.parse(line.value))));
  }
  await owner.end('safe');
} else if (command === 'watch') {
  const [stream, token, key, lastSeq] = rest;
  const model = await WatchModel.open(client, stream, token, { e2e: `k=${key}` });
  while (model.lastSeq < Number(lastSeq)) await new Promise((resolve) => model.once('change', resolve));
  await model.settled();
  for (const p of model.points) console.log(JSON.stringify(p.ok ? { seq: p.seq, ok: true, position: p.position } : { seq: p.seq, ok: false, label: p.label }));
} else {
  console.error(`unknown command ${command}`);
  process.exit(64);
}
client.close();
process.exit(0);
