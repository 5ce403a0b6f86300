// vigil-client: a dependency-free client for vigild's /v1 protocol (docs/PROTOCOL.md).
export { VigilClient, VigilError, Watch, Owner, WRITE_OPS, newIdemKey } from './client.js';
export { Circle } from './circle.js';
export { MapModel, WatchModel } from './models.js';
export { followPosition } from './owner.js';
export { Emitter } from './emitter.js';
