// swift-tools-version:6.1
// Vigil: a realtime WebSocket pub/sub daemon for safety and community-map apps.
// The target list is the architecture: C shims → event loop → pure wire protocol → server glue → executables.
import PackageDescription

/// Dynamic exclusivity checking off in the modules on the fan-out's per-recipient path.
///
/// Why: every access to a class's stored `var` (a connection's queue, its lifecycle, the
/// application's tables) is checked at run time by default (`swift_beginAccess`, a thread-local
/// access set), and at map fan-out saturation those checks were ~12% of the daemon's samples, a
/// quarter of its user-space time (`benchmarks/profile_fanout.sh`). These modules are driven by
/// one event-loop thread, no access there overlaps another by design, and the static checks
/// still run at compile time. Bounds and overflow checks stay on (`-Ounchecked` would drop them,
/// and with them the guarantees on hostile input). `unsafeFlags` are accepted because this is
/// the root package: SwiftPM refuses them only in a package used as a dependency, and nothing
/// depends on Vigil as a package.
let hotPathFlags: [SwiftSetting] = [.unsafeFlags(["-enforce-exclusivity=unchecked"])]

/// A package product that the daemon, the load client, the benchmarks or the tests use: only with
/// the `Daemon` trait, which is on by default. An app that adds this package for `VigilClient`
/// with `traits: []` resolves and fetches none of these packages (SwiftPM prunes dependencies
/// used only under disabled traits), so their versions can never conflict with the app's own.
func daemon(_ product: String, _ package: String) -> Target.Dependency {
    .product(name: product, package: package, condition: .when(traits: ["Daemon"]))
}

let package = Package(
    name: "vigil",
    // Apple platforms matter only to VigilClient (its API uses `Duration`); the daemon is Linux-only.
    platforms: [.macOS(.v13), .iOS(.v16), .tvOS(.v16), .watchOS(.v9)],
    products: [
        .executable(name: "vigild", targets: ["vigild"]),
        .executable(name: "vigil-bench", targets: ["vigil-bench"]),
        .executable(name: "vigil-load", targets: ["vigil-load"]),
        // The Swift client apps add by version (`.package(url: …, from: …)`). Its graph holds no
        // target with unsafe flags and none of the daemon's: SwiftPM builds a version dependency
        // only then (docs/design/swift-client.md).
        .library(name: "VigilClient", targets: ["VigilClient"]),
    ],
    traits: [
        .trait(name: "Daemon", description: "vigild, vigil-load, vigil-bench and the tests, with their package dependencies"),
        .default(enabledTraits: ["Daemon"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/jpsim/Yams", from: "6.2.2"),
        .package(url: "https://github.com/apple/swift-collections", from: "1.6.0"),
        .package(url: "https://github.com/HdrHistogram/hdrhistogram-swift", from: "0.2.0"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
        // `swift package generate-documentation --target VigilClient` (DocC); used by no target.
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.5.0"),
    ],
    targets: [
        // Linux syscalls Swift's Glibc module does not export (epoll, eventfd, timerfd, signalfd).
        .target(name: "CLinux"),
        // OpenSSL: libcrypto (SHA-1, SHA-256, base64, RAND_bytes) and libssl (TLS for wss://).
        .systemLibrary(
            name: "COpenSSL",
            pkgConfig: "openssl",
            providers: [.apt(["libssl-dev"])]
        ),
        // zlib's raw DEFLATE streams for permessage-deflate (RFC 7692); the shim wraps the init macros.
        .systemLibrary(
            name: "CZlib",
            pkgConfig: "zlib",
            providers: [.apt(["zlib1g-dev"])]
        ),
        // A heap block of bytes shared by reference: written once (a JSON event, a frame), queued on many sockets.
        .target(name: "VigilBytes"),
        // The reactor: epoll, byte streams, timers, signals, inboxes, output buffers. Knows fds and bytes, nothing of WebSocket.
        .target(
            name: "VigilLoop",
            dependencies: ["CLinux", "COpenSSL", "VigilBytes"],
            swiftSettings: hotPathFlags
        ),
        // Pure protocol over bytes: HTTP/1.1 request parsing, the RFC 6455 handshake, frames, messages, UTF-8, close codes,
        // permessage-deflate (RFC 7692) negotiation and its zlib streams.
        .target(name: "VigilWire", dependencies: ["COpenSSL", "CZlib", "VigilBytes"]),
        // Pure geometry: geohash encode/decode/neighbours, areas (bbox, circle), covers, distances.
        .target(name: "VigilGeo"),
        // The domain: pins, channels and fan-out, the JSON wire messages. No sockets.
        .target(
            name: "VigilCore",
            dependencies: [
                "VigilGeo", "VigilBytes",
                daemon("HeapModule", "swift-collections"),
            ],
            swiftSettings: hotPathFlags
        ),
        // Pure NATS client protocol over bytes (the codec, INFO/CONNECT, headers) and the JetStream
        // API's JSON and rules (stream config, publish acks, ordered consumption); JSON from VigilCore.
        .target(name: "VigilNATS", dependencies: ["VigilCore"]),
        // The NATS client on the loop (connection, reconnects, request/reply) and the JetStream calls
        // a cluster needs (and SHA-256 from libcrypto for object digests; Ed25519 for the nkey
        // signature and the TLS client context). Knows the loop and the NATS codec, nothing of
        // WebSocket or the hubs.
        .target(name: "VigilReplication", dependencies: ["VigilLoop", "VigilNATS", "COpenSSL"]),
        // The outgoing HTTP/1.1 client on the loop (Web Push, webhooks): keep-alive connections per
        // origin, bounded queues, deadlines, TLS verified through VigilLoop's OpenSSL context, names
        // resolved off the loop. Knows the loop and the HTTP codec (VigilWire), nothing of WebSocket.
        .target(
            name: "VigilHTTPClient",
            dependencies: [
                "VigilLoop", "VigilWire",
                daemon("DequeModule", "swift-collections"),
                daemon("Logging", "swift-log"),
            ]
        ),
        // Durable state: snapshot and journal codecs (pure), the state directory's files, recovery,
        // the state digest (SHA-256 from libcrypto: a hash function, nothing of sockets or TLS).
        .target(name: "VigilState", dependencies: ["VigilCore", "VigilGeo", "COpenSSL"]),
        // Web Push and webhook cryptography over bytes, no sockets: RFC 8291 message encryption (aes128gcm,
        // RFC 8188), RFC 8292 VAPID (ES256 JWTs, the application server's P-256 key and its PEM file),
        // Standard Webhooks signatures. Every primitive is libcrypto's; base64 and RAND_bytes from VigilWire.
        .target(name: "VigilPush", dependencies: ["COpenSSL", "VigilWire"]),
        // Glue: connection state machine, routing, configuration (VigilPush: the `push:` section's
        // keys are loaded with the config, and subscriptions' endpoints checked as they arrive).
        .target(
            name: "VigilServer",
            dependencies: [
                "VigilLoop", "VigilWire", "VigilCore", "VigilGeo", "VigilState", "VigilBytes", "CLinux",
                "VigilNATS", "VigilReplication", "VigilPush", "VigilHTTPClient",
                daemon("Logging", "swift-log"),
                daemon("OrderedCollections", "swift-collections"),
                daemon("HeapModule", "swift-collections"),
                daemon("Yams", "Yams"),
                daemon("Metrics", "swift-metrics"),
                daemon("Prometheus", "swift-prometheus"),
            ],
            swiftSettings: hotPathFlags
        ),
        .executableTarget(
            name: "vigild",
            dependencies: [
                "VigilServer", "VigilState", "VigilLoop", "VigilReplication", "VigilNATS", "VigilPush",
                daemon("ArgumentParser", "swift-argument-parser"),
                daemon("Logging", "swift-log"),
                daemon("Metrics", "swift-metrics"),
                daemon("Prometheus", "swift-prometheus"),
            ]
        ),
        // Micro-benchmarks of the core without sockets (the load client measures the whole daemon;
        // the fan-out's framing is the daemon's own, from VigilServer),
        // and the snapshot store's transfers against a running nats-server.
        .executableTarget(
            name: "vigil-bench",
            dependencies: [
                "VigilCore", "VigilGeo", "VigilWire", "VigilLoop", "VigilState", "VigilBytes", "VigilLoad",
                "VigilReplication", "VigilNATS", "VigilServer", "VigilClient",
                daemon("ArgumentParser", "swift-argument-parser"),
            ]
        ),
        // The load client's logic without sockets: latency bookkeeping, correctness checkers, reports.
        .target(
            name: "VigilLoad",
            dependencies: [
                "VigilCore", "VigilGeo", "VigilClient",
                daemon("Histogram", "hdrhistogram-swift"),
            ]
        ),
        // The load client: the project's own event loop and codec in client mode, driving a vigild.
        .executableTarget(
            name: "vigil-load",
            dependencies: [
                "VigilLoad", "VigilLoop", "VigilWire", "VigilCore", "VigilGeo", "VigilBytes", "CLinux",
                daemon("ArgumentParser", "swift-argument-parser"),
            ]
        ),
        // The Swift client: the protocol's models, requests, reconnects, resume and the outbox in
        // transport-independent code, a URLSessionWebSocketTask transport on Apple platforms, and
        // on Linux (no WebSocket in URLSession there) a socket transport on VigilWire's client
        // handshake and frames, plain or TLS through OpenSSL. No unsafe flags anywhere in its graph.
        .target(
            name: "VigilClient",
            dependencies: [
                .target(name: "VigilWire", condition: .when(platforms: [.linux])),
                .target(name: "COpenSSL", condition: .when(platforms: [.linux])),
            ]
        ),
        // What several test targets share (seeded generator, deterministic secrets, client frames,
        // the map hub's brute-force oracle, the TLS tests' throwaway PKI), in one place instead of a copy per target. A plain
        // library under Tests/: nothing but tests depends on it.
        .target(
            name: "VigilTestSupport",
            dependencies: ["VigilCore", "VigilGeo", "VigilWire", "VigilLoad"],
            path: "Tests/VigilTestSupport"
        ),
        .testTarget(name: "VigilWireTests", dependencies: ["VigilWire", "VigilTestSupport"]),
        .testTarget(name: "VigilLoopTests", dependencies: ["VigilLoop", "VigilBytes", "CLinux", "VigilTestSupport"]),
        .testTarget(
            name: "VigilServerTests",
            dependencies: [
                "VigilServer", "VigilLoop", "VigilWire", "VigilCore", "VigilState", "VigilBytes", "VigilTestSupport", "VigilPush",
                daemon("Logging", "swift-log"),
            ]
        ),
        .testTarget(name: "VigilGeoTests", dependencies: ["VigilGeo", "VigilTestSupport"]),
        .testTarget(name: "VigilCoreTests", dependencies: ["VigilCore", "VigilBytes", "VigilTestSupport"]),
        .testTarget(name: "VigilStateTests", dependencies: ["VigilState", "VigilCore", "VigilGeo", "VigilTestSupport"]),
        .testTarget(name: "VigilNATSTests", dependencies: ["VigilNATS", "VigilCore"]),
        // Against a real `nats-server -js` the tests start on loopback ports (Tests/setup-deps installs it).
        .testTarget(name: "VigilReplicationTests", dependencies: ["VigilReplication", "VigilNATS", "VigilLoop", "COpenSSL", "VigilTestSupport"]),
        // Pure pieces (the pool, the lifecycle) without sockets; the rest against a Python HTTP(S)
        // server the tests start on loopback (Tests/http-test-server).
        .testTarget(name: "VigilHTTPClientTests", dependencies: ["VigilHTTPClient", "VigilLoop", "VigilWire", "VigilTestSupport"]),
        .testTarget(name: "VigilLoadTests", dependencies: ["VigilLoad", "VigilCore", "VigilGeo"]),
        .testTarget(name: "VigilPushTests", dependencies: ["VigilPush", "VigilWire", "COpenSSL"]),
        .testTarget(name: "VigilClientTests", dependencies: ["VigilClient"]),
        // VigilPush from the command line, for the end-to-end tests' independent checks in Python
        // (Tests/e2e/test_push_crypto.py: their push service decrypts and verifies what it makes).
        // Test-only; not a product.
        .executableTarget(name: "vigil-push-probe", dependencies: ["VigilPush"], path: "Tests/VigilPushProbe"),
    ],
    swiftLanguageModes: [.v6]
)
