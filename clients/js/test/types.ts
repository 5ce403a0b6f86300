// Compiled by package.test.js with tsc --strict (not run): the declarations in vigil.d.ts must type the
// README's uses of the library.
import { VigilClient, MapModel, WatchModel, followPosition, VigilError, Pin, Circle, CheckinPanic, WRITE_OPS, newIdemKey, e2e, E2EError, E2EPosition, StreamKeys, WatchPoint, watchLink, CANNOT_DECRYPT, E2EWatchView } from '../vigil';

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
  // A write that timed out is sent again under its own key: applied at most once.
  const idem: string = newIdemKey();
  try {
    await client.request('pin.create', { idem, pin: { lat: 1, lon: 2, title: 't' } });
  } catch (e) {
    if (e instanceof VigilError && e.code === 'timeout' && e.idem) await client.request('pin.create', { idem: e.idem, pin: { lat: 1, lon: 2, title: 't' } });
  }
  const waiting: number = client.outboxSize;
  const isWrite: boolean = WRITE_OPS.has('pin.create');
  console.log(waiting, isWrite, new VigilClient('ws://x', { maxOutbox: 10 }).outboxSize);
  stop();
  // Circles: the owner's side, a member's side, a circle's panic followed with the member token.
  const circle = await client.createCircle(['Mum', null]);
  const invite: string = circle.memberTokens[0].token;
  const mum: Circle = await client.joinCircle(circle.id, invite);
  mum.on('panic', (e: CheckinPanic) => console.log(e.stream, e.event, e.status));
  client.on('checkin.panic', (e) => console.log(e.circle, e.reason));
  const alarm = await circle.startPanic({ status: 'red', lat: 1, lon: 2 });
  const followed = await WatchModel.open(client, alarm.stream, { memberToken: invite });
  const watch = await client.watch(alarm.stream, { memberToken: invite, since: 1 });
  const sub: string = await client.registerPush(circle.id, { memberToken: invite }, { endpoint: 'https://push.example/x', expirationTime: null, keys: { p256dh: 'p', auth: 'a' } });
  await mum.unregister(sub);
  await client.startPanic({ status: 'amber', lat: 1, lon: 2, circle: circle.id, ownerToken: circle.ownerToken ?? '' });
  console.log(mum.panics.map((p) => p.escalated_at), mum.state?.you?.label, followed.status, watch.credential, alarm.circle, await mum.request());
  console.log(pins.length, MapModel.timeLeftMs(pins[0]), titleBytes, noteBytes);
  const sk = await e2e.newStreamKey();
  const sealed: string = await e2e.seal(sk.key, sk.kid, 1, 'red', { lat: 1, lon: 2, note: 'n' });
  try {
    const opened: E2EPosition = await e2e.open(sk.key, sk.kid, 1, 'red', sealed);
    console.log(opened.lat, opened.note, e2e.encodeKey(sk.key), e2e.keyFromFragment(location.hash).state);
  } catch (e) {
    if (e instanceof E2EError && e.code === 'cannot_decrypt') console.log('cannot decrypt this update');
  }
  client.close();
}
main('a', 'b');

// End-to-end encrypted streams on the wire.
async function e2eTypes(client: VigilClient): Promise<void> {
  const owner = await client.startPanic({ status: 'red', lat: 1, lon: 2, e2e: true, memberSecrets: new Map([[1, new Uint8Array(32)]]) });
  const keys: StreamKeys | null = owner.e2e;
  if (keys) {
    const link: string = watchLink('https://x', owner.stream, owner.watchTokens[0], keys.key);
    const model = await WatchModel.open(client, owner.stream, owner.watchTokens[0], { e2e: link.split('#')[1] });
    model.on('point', (p: WatchPoint) => { if (p.ok) { const lat: number = p.position.lat; void lat; } else { const l: string = p.label; void l; } });
    await model.settled();
    const notice: string | null = model.notice;
    void notice;
  }
  const next: StreamKeys = await owner.rekey();
  void next;
  const label: 'cannot decrypt this update' = CANNOT_DECRYPT;
  void label;
  void new E2EWatchView({ key: new Uint8Array(32) });
}
void e2eTypes;
