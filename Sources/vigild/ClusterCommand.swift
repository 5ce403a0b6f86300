import ArgumentParser
import Foundation
import VigilCluster
import VigilLoop
import VigilNATS

/// `vigild cluster ...`: the NATS side of a cluster, checked from the command line.
struct ClusterCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "cluster",
        abstract: "Tools for the cluster: section (NATS JetStream).",
        subcommands: [Check.self, PublicKey.self])

    /// The config's `cluster:` section, its files read; exit 1 with the reasons when the file is
    /// invalid or has no such section.
    static func settings(from path: String) throws -> ClusterSettings {
        let settings: ClusterSettings
        do {
            settings = try Vigild.loadConfig(path: path).cluster
        } catch {
            FileHandle.standardError.write(Data("\(path): invalid\n\(Vigild.indent(error))\n".utf8))
            throw ExitCode(1)
        }
        guard settings.enabled else {
            FileHandle.standardError.write(Data("\(path): no cluster: section\n".utf8))
            throw ExitCode(1)
        }
        return settings
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
            let settings = try ClusterCommand.settings(from: config)
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
            cluster.replicas copies, bounded by cluster.max_age_s and cluster.max_bytes). Prints one line of JSON.
            """)

        @Argument(help: ArgumentHelp("YAML config file with a cluster: section.", valueName: "config-file"))
        var config: String

        @Flag(name: .customLong("create-stream"), help: "Create the stream when it does not exist.")
        var createStream = false

        @Option(name: .customLong("timeout-ms"), help: "Give up after this long without a connection and an answer.")
        var timeoutMs: Int = 10_000

        func run() throws {
            let settings = try ClusterCommand.settings(from: config)
            ProcessLimits.ignoreSIGPIPE()
            let loop = try EventLoop()
            let client: NATSClient
            do {
                client = try settings.makeClient(loop: loop)
            } catch {
                FileHandle.standardError.write(Data("vigild cluster check: TLS: \(error)\n".utf8))
                throw ExitCode(1)
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
            try client.start()
            let jetStream = JetStream(client: client, timeoutMs: Int64(settings.requestTimeoutMs))
            let deadline = monotonicMilliseconds() + Int64(timeoutMs)
            var outcome: Result<JSStreamInfo, JetStreamError>?
            var asked = false
            while outcome == nil && monotonicMilliseconds() < deadline {
                try loop.turn(timeoutMs: 50)
                guard client.state == .connected, !asked else { continue }
                asked = true
                do {
                    if createStream {
                        try jetStream.ensureStream(settings.streamConfig) { outcome = $0 }
                    } else {
                        try jetStream.streamInfo(settings.name) { outcome = $0 }
                    }
                } catch {
                    outcome = .failure(.client(error))
                }
            }
            let server = client.serverInfo
            let overTLS = client.usesTLS
            client.close()
            try loop.turn(timeoutMs: 0)
            switch outcome {
            case .success(let info)?:
                print(#"{"ok":true,"cluster":"\#(settings.name)","node":"\#(settings.nodeID)","server_version":"\#((server?.version ?? "").filter { $0.isASCII && $0.isLetter || $0.isNumber || $0 == "." || $0 == "-" })","jetstream":\#(server?.jetStream ?? false),"tls":\#(overTLS),"stream":{"name":"\#(info.name)","messages":\#(info.messages),"bytes":\#(info.bytes),"first_seq":\#(info.firstSequence),"last_seq":\#(info.lastSequence),"replicas":\#(info.replicas)}}"#)
            case .failure(let error)?:
                FileHandle.standardError.write(Data("vigild cluster check: \(error)\n".utf8))
                throw ExitCode(1)
            case nil:
                // A certificate the system's CAs do not vouch for is the usual first TLS failure.
                let untrusted = settings.tlsCAFile.isEmpty && lastReasons.contains { $0.contains("local issuer") || $0.contains("self-signed") }
                // A server with `verify: true` refuses a node without a certificate once TLS is up.
                let noCertificate = settings.tlsCertFile.isEmpty && lastReasons.contains { $0.contains("alert bad certificate") || $0.contains("certificate required") }
                let hint = untrusted ? "; cluster.tls.ca_file names the CA that signed the servers' certificates (without it the system's CAs are used)"
                    : noCertificate ? "; the server asks for a client certificate: set cluster.tls.cert_file and cluster.tls.key_file" : ""
                FileHandle.standardError.write(Data("vigild cluster check: no answer within \(timeoutMs) ms (last: \(lastReasons.isEmpty ? "no answer" : lastReasons.joined(separator: "; ")))\(hint)\n".utf8))
                throw ExitCode(1)
            }
        }
    }
}
