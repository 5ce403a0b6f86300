import Testing
import VigilReplication
@testable import VigilServer

/// The four failover timing keys of `cluster:` (docs/CLUSTER.md "Failover"): H
/// `consumer_heartbeat_ms`, A `ack_timeout_ms`, W `write_deadline_ms`, p `ping_interval_ms`.
/// Each has its default, takes both ends of its range, and refuses the value just outside
/// either end with an issue naming the key.
@Suite struct ConfigLoaderReplicationTimingTests {
    struct Key: Sendable, CustomTestStringConvertible {
        let name: String
        let defaultValue: Int
        let bounds: ClosedRange<Int>
        let read: @Sendable (ReplicationSettings) -> Int
        var testDescription: String { "cluster.\(name)" }
    }

    static let keys = [
        Key(name: "consumer_heartbeat_ms", defaultValue: 1_000, bounds: 250...5_000, read: { $0.consumerHeartbeatMs }),
        Key(name: "ack_timeout_ms", defaultValue: 500, bounds: 100...5_000, read: { $0.ackTimeoutMs }),
        Key(name: "write_deadline_ms", defaultValue: 10_000, bounds: 1_000...60_000, read: { $0.writeDeadlineMs }),
        Key(name: "ping_interval_ms", defaultValue: 2_000, bounds: 500...60_000, read: { $0.pingIntervalMs }),
    ]

    /// A cluster section with its required keys and `extra` lines.
    private func replication(_ extra: String...) -> String {
        (["cluster:", "  urls: [nats://127.0.0.1:4222]", "  node_id: n1"] + extra.map { "  " + $0 }).joined(separator: "\n") + "\n"
    }

    @Test(arguments: keys)
    func theDefaultIsTheDocumentedOne(_ key: Key) throws {
        let loaded = try ConfigLoader.load(yaml: replication()).replication
        #expect(key.read(loaded) == key.defaultValue)
        #expect(key.read(ReplicationSettings()) == key.defaultValue)
    }

    @Test(arguments: keys)
    func bothEndsOfTheRangeAreTaken(_ key: Key) throws {
        for value in [key.bounds.lowerBound, key.bounds.upperBound] {
            let config = try ConfigLoader.load(yaml: replication("\(key.name): \(value)"))
            #expect(key.read(config.replication) == value)
            // The other three keep their defaults.
            for other in Self.keys where other.name != key.name {
                #expect(other.read(config.replication) == other.defaultValue, "\(other.name) after \(key.name): \(value)")
            }
            // cluster.ping_interval_ms is the NATS ping, not the WebSocket one of `websocket:`.
            #expect(config.pingIntervalMs == ServerConfig().pingIntervalMs)
        }
    }

    @Test(arguments: keys)
    func justOutsideEitherEndIsRefusedNamingTheKey(_ key: Key) {
        let (low, high) = (key.bounds.lowerBound, key.bounds.upperBound)
        for value in [low - 1, high + 1] {
            let error = #expect(throws: ConfigError.self) { try ConfigLoader.load(yaml: replication("\(key.name): \(value)")) }
            #expect(error?.issues.map { "\($0.key): \($0.message)" } == ["cluster.\(key.name): must be between \(low) and \(high), got \(value)"])
        }
    }

    /// No rule ties these keys to each other: the loader checks each against its own range only
    /// (`ConfigLoader.crossCheckCluster` has no rule on them). config/vigild.yaml advises W above a
    /// leader election plus A, but a W below A loads, and so do all four at either extreme.
    @Test func noRuleBetweenTheKeysIsEnforced() throws {
        let short = try ConfigLoader.load(yaml: replication("write_deadline_ms: 1000", "ack_timeout_ms: 5000")).replication
        #expect(short.writeDeadlineMs == 1_000 && short.ackTimeoutMs == 5_000)
        for pick in [\ClosedRange<Int>.lowerBound, \ClosedRange<Int>.upperBound] {
            let lines = Self.keys.map { "\($0.name): \($0.bounds[keyPath: pick])" }
            let c = try ConfigLoader.load(yaml: replication(lines[0], lines[1], lines[2], lines[3])).replication
            #expect(Self.keys.map { $0.read(c) } == Self.keys.map { $0.bounds[keyPath: pick] })
        }
    }
}
