#!/usr/bin/env node
// The JavaScript client's cost to seal and open an end-to-end encrypted panic update
// (clients/js/src/e2e.js: the plaintext's JSON and padding, a fresh nonce, WebCrypto's
// AES-256-GCM, base64url; opening parses and checks the position), in node's WebCrypto, the same
// API browsers give the /panic and /watch pages. Prints the median of --runs runs, each of
// --updates sealed then opened one after the other (awaited: a page seals one update at a time).
//
//     taskset -c 1 node benchmarks/e2e_seal.mjs [--runs 5] [--updates 5000] [--note 0]
//
// Times are wall clock per update on an otherwise idle core; node's process CPU time over the
// same span is printed beside them (WebCrypto may use a worker thread).
import { performance } from 'node:perf_hooks';
import { newStreamKey, seal, open } from '../clients/js/src/e2e.js';

const args = Object.fromEntries(process.argv.slice(2).reduce((acc, a, i, all) => {
  if (a.startsWith('--')) acc.push([a.slice(2), all[i + 1]]);
  return acc;
}, []));
const runs = Number(args.runs ?? 5), updates = Number(args.updates ?? 5000), noteBytes = Number(args.note ?? 0);

const { key, kid } = await newStreamKey();
const positions = Array.from({ length: updates }, (_, i) => ({
  lat: 52.520008123456 + i * 1e-7, lon: 13.404954987654 - i * 1e-7,
  accuracy_m: 6, heading: 271.5, speed_mps: 1.4, ...(noteBytes > 0 ? { note: 'n'.repeat(noteBytes) } : {}),
}));

const median = (v) => [...v].sort((a, b) => a - b)[Math.floor(v.length / 2)];
const us = (v) => v.toFixed(2);
const sealUs = [], openUs = [], sealCpu = [], openCpu = [];
let chars = 0;
for (let r = 0; r < runs; r++) {
  const sealed = [];
  let c0 = process.cpuUsage(), t0 = performance.now();
  for (let i = 0; i < updates; i++) sealed.push(await seal(key, kid, i + 2, 'red', positions[i]));
  let t1 = performance.now(), c1 = process.cpuUsage(c0);
  for (let i = 0; i < updates; i++) {
    const p = await open(key, kid, i + 2, 'red', sealed[i]);
    if (p.lat !== positions[i].lat) throw new Error('opened a different position');
  }
  const t2 = performance.now(), c2 = process.cpuUsage(c0);
  sealUs.push((t1 - t0) * 1000 / updates);
  openUs.push((t2 - t1) * 1000 / updates);
  sealCpu.push((c1.user + c1.system) / updates);
  openCpu.push((c2.user + c2.system - c1.user - c1.system) / updates);
  chars = sealed[0].length;
}
console.log(`e2e seal: median ${us(median(sealUs))} µs per update, CPU ${us(median(sealCpu))} µs (runs: ${sealUs.map(us).join(', ')})`);
console.log(`e2e open: median ${us(median(openUs))} µs per update, CPU ${us(median(openCpu))} µs (runs: ${openUs.map(us).join(', ')})`);
console.log(`sealed value: ${chars} characters; ${updates} updates per run, note ${noteBytes} bytes, node ${process.version}`);
