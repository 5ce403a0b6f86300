// vigil-client: a dependency-free client for vigild's /v1 protocol (docs/PROTOCOL.md).
export { VigilClient, VigilError, Watch, Owner, WRITE_OPS, newIdemKey } from './client.js';
export { Circle } from './circle.js';
export { MapModel, WatchModel } from './models.js';
export { followPosition } from './owner.js';
export { Emitter } from './emitter.js';
// End-to-end encrypted streams' crypto (docs/design/e2e-streams.md): `e2e.seal`, `e2e.open`, …
export * as e2e from './e2e.js';
export { E2EError } from './e2e.js';
// What a watch page shows for an e2e stream, and the watch link with the key in its fragment.
export { E2EWatchView, watchLink, CANNOT_DECRYPT, KEY_NOTICES } from './e2ewatch.js';
