// swift-tools-version:6.0
// Vigil: a realtime WebSocket pub/sub daemon for safety and community-map apps.
// The target list is the architecture: C shims → event loop → pure wire protocol → server glue → executables.
import PackageDescription

let package = Package(
    name: "vigil",
    products: [
        .executable(name: "vigild", targets: ["vigild"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/jpsim/Yams", from: "6.2.2"),
    ],
    targets: [
        // Linux syscalls Swift's Glibc module does not export (epoll, eventfd, timerfd, signalfd).
        .target(name: "CLinux"),
        // OpenSSL's libcrypto (SHA-1, base64, RAND_bytes); libssl joins for TLS.
        .systemLibrary(
            name: "COpenSSL",
            pkgConfig: "openssl",
            providers: [.apt(["libssl-dev"])]
        ),
        // The reactor: epoll, sockets, timers, signals, output buffers. Knows fds and bytes, nothing of WebSocket.
        .target(name: "VigilLoop", dependencies: ["CLinux"]),
        // Pure protocol over bytes: HTTP/1.1 request parsing, the RFC 6455 handshake, frames, UTF-8, close codes.
        .target(name: "VigilWire", dependencies: ["COpenSSL"]),
        // Glue: connection state machine, routing, configuration.
        .target(
            name: "VigilServer",
            dependencies: [
                "VigilLoop", "VigilWire", "CLinux",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Yams", package: "Yams"),
            ]
        ),
        .executableTarget(
            name: "vigild",
            dependencies: [
                "VigilServer",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .testTarget(name: "VigilWireTests", dependencies: ["VigilWire"]),
        .testTarget(name: "VigilLoopTests", dependencies: ["VigilLoop"]),
        .testTarget(name: "VigilServerTests", dependencies: ["VigilServer"]),
    ],
    swiftLanguageModes: [.v5]
)
