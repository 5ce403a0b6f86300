// Compiled by package.test.js with tsc --strict (not run): the declarations in vigil.d.ts must type the
// README's uses of the library.
import { VigilClient, MapModel, WatchModel, followPosition, VigilError, Pin } from '../vigil';

async function main(streamId: string, watchToken: string): Promise<void> {
  const client = new VigilClient('ws://127.0.0.1:8080/v1', { reconnect: { minDelayMs: 100 }, requestTimeoutMs: 5000 });
  await client.connect();
  const titleBytes: number | undefined = client.limits?.title_max_bytes;
  const noteBytes: number | undefined = client.limits?.panic_note_max_bytes;
  const map = new MapModel(client);
  map.on('removed', (e) => console.log(e.pin.id, e.reason));
  const reply = await client.subscribe({ bbox: [52.3, 13.0, 52.7, 13.8] });
  const pins: Pin[] = reply.pins;
  const m = await WatchModel.open(client, streamId, watchToken);
  m.on('change', (x) => console.log(x.last?.lat, x.status, x.stale, x.ended?.reason, x.escalated && x.escalated.sent_at - x.escalated.at));
  const owner = await client.startPanic({ status: 'red', lat: 1, lon: 2, watchers: 2 });
  const stop = followPosition(owner, (on) => { on({ lat: 1, lon: 2 }); return () => {}; }, { minIntervalMs: 1000 });
  await owner.setStatus('amber');
  try { await client.request('pin.vote', { id: 'x', value: 1 }); } catch (e) { if (e instanceof VigilError) console.log(e.code, e.field, e.retryAfterMs); }
  stop();
  console.log(pins.length, MapModel.timeLeftMs(pins[0]), titleBytes, noteBytes);
  client.close();
}
main('a', 'b');
