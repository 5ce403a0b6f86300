import ArgumentParser
import Foundation
import VigilReplication
import VigilCore
import VigilLoop
import VigilNATS

/// `vigild cluster ...`: the NATS side of a cluster, checked from the command line.
struct ReplicationCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "cluster",
        abstract: "Tools for the cluster: section (NATS JetStream).",
        subcommands: [Check.self, PublicKey.self])

    /// The config's `cluster:` section, its files read, or why it cannot be used (the file is
    /// invalid or has no such section).
    static func load(_ path: String) -> Result<ReplicationSettings, CheckFailure> {
        let settings: ReplicationSettings
        do {
            settings = try Vigild.loadConfig(path: path).replication
        } catch {
            return .failure(CheckFailure(.config, "\(path): invalid\n\(Vigild.indent(error))"))
        }
        guard settings.enabled else { return .failure(CheckFailure(.config, "\(path): no cluster: section")) }
        return .success(settings)
    }

    /// The settings, or exit 1 with the reason on stderr (`public-key`, whose output is text).
    static func settings(from path: String) throws -> ReplicationSettings {
        switch load(path) {
        case .success(let settings): return settings
        case .failure(let failure):
            FileHandle.standardError.write(Data("\(failure.message)\n".utf8))
            throw ExitCode(1)
        }
    }

    /// `vigild cluster public-key FILE`: the public nkey (`U...`) of the config's nkey seed or
    /// `.creds` file, which a NATS server's config names the user by. Public: safe to print.
    struct PublicKey: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "public-key",
            abstract: "Print the public nkey (U...) of cluster.nkey_seed_file or cluster.creds_file (exit 0 ok, 1 not).")

        @Argument(help: ArgumentHelp("YAML config file with a cluster: section.", valueName: "config-file"))
        var config: String

        func run() throws {
            let settings = try ReplicationCommand.settings(from: config)
            guard let seed = settings.credentials.signingSeed else {
                FileHandle.standardError.write(Data("\(config): neither cluster.nkey_seed_file nor cluster.creds_file is set\n".utf8))
                throw ExitCode(1)
            }
            print(try NATSNKeySigner.publicKey(of: seed))
        }
    }

    /// Connects as the node would, and reports the server and the stream: the operator's first
    /// look before a node joins, and the end-to-end tests' handle on the client in this binary.
    struct Check: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Connect to the config's NATS servers and report the cluster's JetStream stream (exit 0 ok, 1 not).",
            discussion: """
            Tries the servers of cluster.urls in order, with the configured credentials; asks JetStream for the stream
            named cluster.name. With --create-stream, creates it when missing (subjects NAME.>, file storage,
            cluster.replicas copies, bounded by cluster.max_age_s and cluster.max_bytes). Compares every stream setting
            vigild relies on with the config's: any difference is a failure; with --update-stream, the ones JetStream
            changes (replicas, max_age, max_bytes, discard, duplicate_window) are changed to the config's. Prints one
            line of JSON on stdout, on success and on failure (error.kind: config, tls, no_answer, auth, no_jetstream,
            stream_missing, stream_differs, api).
            """)

        @Argument(help: ArgumentHelp("YAML config file with a cluster: section.", valueName: "config-file"))
        var config: String

        @Flag(name: .customLong("create-stream"), help: "Create the stream when it does not exist.")
        var createStream = false

        @Option(name: .customLong("timeout-ms"), help: "Give up after this long without a connection and an answer.")
        var timeoutMs: Int = 10_000

        @Flag(name: .customLong("update-stream"),
              help: "Change the stream's replicas, max_age, max_bytes, discard and duplicate_window to the config's when they differ.")
        var updateStream = false

        /// Prints one line of JSON on stdout whatever happens (docs/OPERATIONS.md), nothing on
        /// stderr; exit 1 on any failure, a stream setting that differs from the config's included.
        func run() throws {
            let settings: ReplicationSettings
            switch ReplicationCommand.load(config) {
            case .success(let loaded): settings = loaded
            case .failure(let failure):
                print(CheckReport(settings: nil, failure: failure).json())
                throw ExitCode(1)
            }
            var report = CheckReport(settings: settings)
            check(settings, into: &report)
            print(report.json())
            if report.failure != nil { throw ExitCode(1) }
        }

        /// Connects, asks for the stream (creating or updating it when told to), and fills `report`.
        private func check(_ settings: ReplicationSettings, into report: inout CheckReport) {
            ProcessLimits.ignoreSIGPIPE()
            let loop: EventLoop
            let client: NATSClient
            do {
                loop = try EventLoop()
            } catch {
                report.failure = CheckFailure(.noAnswer, "event loop: \(error)")
                return
            }
            do {
                client = try settings.makeClient(loop: loop)
            } catch {
                report.failure = CheckFailure(.tls, "TLS: \(error)")
                return
            }
            // Why each server of the list was last left: the client tries them in order, so the last
            // `urls.count` reasons are one per server, and a spare URL that refused the connection
            // does not hide the server that refused the credentials (or the other way round).
            var lastReasons: [String] = []
            let servers = settings.serverURLs.count
            client.addStateObserver { state, reason in
                guard state == .disconnected else { return }
                lastReasons.append(reason)
                if lastReasons.count > servers { lastReasons.removeFirst() }
            }
            let jetStream = JetStream(client: client, timeoutMs: Int64(settings.requestTimeoutMs))
            let deadline = monotonicMilliseconds() + Int64(timeoutMs)
            var outcome: Result<JSStreamInfo, CheckFailure>?
            var asked = false
            do {
                try client.start()
                while outcome == nil && monotonicMilliseconds() < deadline {
                    try loop.turn(timeoutMs: 50)
                    guard client.state == .connected, !asked else { continue }
                    asked = true
                    report.server = client.serverInfo
                    report.tls = client.usesTLS
                    ask(jetStream, settings) { outcome = $0 }
                }
            } catch {
                outcome = .failure(CheckFailure(.noAnswer, "\(error)"))
            }
            client.close()
            try? loop.turn(timeoutMs: 0)
            switch outcome {
            case .success(let info)?:
                report.stream = info
                report.differences = settings.streamConfig.differences(from: info)
            case .failure(let failure)?:
                report.failure = failure
            case nil:
                report.failure = Self.noAnswer(within: timeoutMs, lastReasons: lastReasons, settings: settings)
            }
            if report.failure == nil && !report.differences.isEmpty {
                report.failure = CheckFailure(.streamDiffers, "the stream differs from the config: "
                    + report.differences.map(\.description).joined(separator: "; ")
                    + (report.differences.allSatisfy(\.updatable) ? " (--update-stream changes it)"
                        : "; not changed by an update: " + report.differences.filter { !$0.updatable }.map(\.key).joined(separator: ", ")))
            }
        }

        /// STREAM.INFO (or create when missing, with --create-stream), then with --update-stream
        /// STREAM.UPDATE when only updatable settings differ; `completion` runs once.
        private func ask(_ jetStream: JetStream, _ settings: ReplicationSettings,
                         completion: @escaping (Result<JSStreamInfo, CheckFailure>) -> Void) {
            let config = settings.streamConfig
            let found: (Result<JSStreamInfo, JetStreamError>) -> Void = { result in
                switch result {
                case .failure(let error):
                    completion(.failure(CheckFailure(error)))
                case .success(let info):
                    let differences = config.differences(from: info)
                    guard updateStream, !differences.isEmpty else { return completion(.success(info)) }
                    let fixed = differences.filter { !$0.updatable }
                    guard fixed.isEmpty else {
                        return completion(.failure(CheckFailure(.streamDiffers, "--update-stream refused: "
                            + fixed.map(\.description).joined(separator: "; ")
                            + ": an update does not change \(fixed.count == 1 ? "it" : "them"); the stream was left as it is")))
                    }
                    do throws(NATSClientError) {
                        try jetStream.updateStream(config) { updated in
                            completion(updated.mapError { CheckFailure($0, doing: "STREAM.UPDATE") })
                        }
                    } catch {
                        completion(.failure(CheckFailure(.client(error), doing: "STREAM.UPDATE")))
                    }
                }
            }
            do throws(NATSClientError) {
                if createStream {
                    try jetStream.ensureStream(config, completion: found)
                } else {
                    try jetStream.streamInfo(settings.name, completion: found)
                }
            } catch {
                completion(.failure(CheckFailure(.client(error))))
            }
        }

        /// No connection and answer in time: the servers' reasons, classified (credentials, TLS,
        /// or nothing usable), with a hint for the usual TLS mistakes.
        static func noAnswer(within timeoutMs: Int, lastReasons: [String], settings: ReplicationSettings) -> CheckFailure {
            // A certificate the system's CAs do not vouch for is the usual first TLS failure.
            let untrusted = settings.tlsCAFile.isEmpty && lastReasons.contains { $0.contains("local issuer") || $0.contains("self-signed") }
            // A server with `verify: true` refuses a node without a certificate once TLS is up.
            let noCertificate = settings.tlsCertFile.isEmpty && lastReasons.contains { $0.contains("alert bad certificate") || $0.contains("certificate required") }
            let hint = untrusted ? "; cluster.tls.ca_file names the CA that signed the servers' certificates (without it the system's CAs are used)"
                : noCertificate ? "; the server asks for a client certificate: set cluster.tls.cert_file and cluster.tls.key_file" : ""
            let message = "no answer within \(timeoutMs) ms (last: \(lastReasons.isEmpty ? "no answer" : lastReasons.joined(separator: "; ")))\(hint)"
            let lowered = lastReasons.map { $0.lowercased() }
            if lowered.contains(where: { $0.contains("authoriz") || $0.contains("authentica") }) { return CheckFailure(.auth, message) }
            if lowered.contains(where: { $0.contains("tls") || $0.contains("certificate") || $0.contains("ssl") || $0.contains("alert") }) {
                return CheckFailure(.tls, message)
            }
            return CheckFailure(.noAnswer, message)
        }
    }
}

/// Why `vigild cluster check` failed: `kind` for scripts, `message` for people.
struct CheckFailure: Error {
    enum Kind: String {
        case config, tls, auth
        case noAnswer = "no_answer"
        case noJetStream = "no_jetstream"
        case streamMissing = "stream_missing"
        case streamDiffers = "stream_differs"
        case api
    }

    let kind: Kind
    let message: String

    init(_ kind: Kind, _ message: String) {
        self.kind = kind
        self.message = message
    }

    /// A JetStream call's failure, classified.
    init(_ error: JetStreamError, doing call: String? = nil) {
        let prefix = call.map { "\($0): " } ?? ""
        switch error {
        case .client(.noResponders):
            self.init(.noJetStream, prefix + "no responders for the JetStream API: is JetStream enabled on the server (-js, jetstream {})?")
        case .client(let client):
            self.init(.noAnswer, prefix + client.description)
        case .api(let api) where api.errorCode == JSAPI.streamNotFound && call == nil:
            self.init(.streamMissing, "\(error.description); --create-stream creates it")
        case .api:
            self.init(.api, prefix + error.description)
        case .mismatch:
            self.init(.streamDiffers, prefix + error.description)
        }
    }
}

/// What `vigild cluster check` prints: one line of JSON, success or failure.
struct CheckReport {
    let settings: ReplicationSettings?
    var failure: CheckFailure?
    var server: NATSServerInfo?
    var tls = false
    var stream: JSStreamInfo?
    var differences: [JSStreamDifference] = []

    init(settings: ReplicationSettings?, failure: CheckFailure? = nil) {
        self.settings = settings
        self.failure = failure
    }

    /// `{"ok":true,"cluster":…,"node":…,"server_version":…,"jetstream":…,"tls":…,"stream":{…},
    /// "settings":{"replicas":{"config":3,"stream":1},…},"differences":[…]}`; on failure `"ok":false`
    /// and `"error":{"kind":…,"message":…}`, with what was learnt before it.
    func json() -> String {
        var w = JSONWriter(capacity: 1024)
        w.beginObject()
        w.field("ok", failure == nil)
        w.field("cluster", settings?.name ?? "")
        w.field("node", settings?.nodeID ?? "")
        if let failure {
            w.key("error")
            w.beginObject()
            w.field("kind", failure.kind.rawValue)
            w.field("message", failure.message)
            w.endObject()
        }
        if let server {
            w.field("server_version", String(server.version.prefix(64)))
            w.field("jetstream", server.jetStream)
            w.field("tls", tls)
        }
        if let stream, let settings {
            w.key("stream")
            w.beginObject()
            w.field("name", stream.name)
            w.field("messages", Int64(clamping: stream.messages))
            w.field("bytes", Int64(clamping: stream.bytes))
            w.field("first_seq", Int64(clamping: stream.firstSequence))
            w.field("last_seq", Int64(clamping: stream.lastSequence))
            w.field("replicas", Int64(stream.replicas))
            if !stream.leader.isEmpty { w.field("leader", stream.leader) }
            w.endObject()
            w.key("settings")
            w.beginObject()
            let streamValues = stream.settings.values
            for (index, (key, value)) in settings.streamConfig.settings.values.enumerated() {
                w.key(key)
                w.beginObject()
                w.key("config")
                value.write(into: &w)
                w.key("stream")
                streamValues[index].value.write(into: &w)
                w.endObject()
            }
            w.endObject()
        }
        w.key("differences")
        w.beginArray()
        for difference in differences { difference.write(into: &w) }
        w.endArray()
        w.endObject()
        return String(decoding: w.bytes, as: UTF8.self)
    }
}
