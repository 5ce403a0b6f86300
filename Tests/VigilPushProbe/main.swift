import Foundation
import VigilPush

/// `vigil-push-probe`: VigilPush driven from the command line, for the end-to-end tests'
/// independent checks in Python (Tests/e2e/test_push_crypto.py). Test-only: nothing ships it.
///
///     vigil-push-probe request --key PEM --subject URI --endpoint URL --p256dh B64URL --auth B64URL
///                              --ttl N [--urgency U] [--topic T] [--now SECONDS] [--lifetime SECONDS]
///                              [--allow-loopback-http]            notice on stdin
///         → {"url":…, "headers":[[name, value], …], "body": base64}
///     vigil-push-probe webhook --secret whsec_… [--secret …] --id ID --timestamp SECONDS
///                                                                  body on stdin
///         → {"headers":[[name, value], …]}
///     vigil-push-probe decrypt --scalar B64URL --auth B64URL        base64 body on stdin
///         → the notice's bytes on stdout
///
/// Exit 0 with the output, 1 with the library's error on stderr, 64 for bad usage.
enum Probe {
    static func main() {
        var arguments = Array(CommandLine.arguments.dropFirst())
        guard !arguments.isEmpty else { usage("a command: request, webhook or decrypt") }
        let command = arguments.removeFirst()
        let options = parse(arguments)
        let input = FileHandle.standardInput.readDataToEndOfFile()
        do {
            switch command {
            case "request": try request(options, notice: [UInt8](input))
            case "webhook": try webhook(options, body: [UInt8](input))
            case "decrypt": try decrypt(options, body: input)
            default: usage("unknown command \(command)")
            }
        } catch {
            FileHandle.standardError.write(Data("vigil-push-probe: \(error)\n".utf8))
            exit(1)
        }
    }

    static func request(_ options: [String: [String]], notice: [UInt8]) throws {
        let key = try VAPIDKeyFile.read(one(options, "key"))
        let signer = VAPIDSigner(key: key, subject: try VAPIDSubject(one(options, "subject")))
        let endpoint = try PushEndpoint(one(options, "endpoint"), allowLoopbackHTTP: options["allow-loopback-http"] != nil)
        let keys = try PushSubscriptionKeys(p256dh: one(options, "p256dh"), auth: one(options, "auth"))
        let now = options["now"].map { Int64($0[0]) ?? 0 } ?? Int64(Date().timeIntervalSince1970)
        let urgency = try options["urgency"].map { text in
            guard let value = PushUrgency(rawValue: text[0]) else { throw ProbeError("unknown urgency \(text[0])") }
            return value
        }
        let request = try WebPushRequest(notice: notice, subscription: keys, endpoint: endpoint, signer: signer, now: now,
                                         ttl: Int(one(options, "ttl")) ?? -1, urgency: urgency, topic: options["topic"]?[0])
        var headers = request.headers
        if let lifetime = options["lifetime"].flatMap({ Int64($0[0]) }) {
            // A token of another lifetime in place of the default one (the tests' expiry cases).
            let authorization = try signer.authorization(for: endpoint, now: now, lifetime: lifetime)
            headers = headers.map { $0.name == "Authorization" ? ($0.name, authorization) : $0 }
        }
        emit(["url": endpoint.url, "headers": headers.map { [$0.name, $0.value] }, "body": Data(request.body).base64EncodedString()])
    }

    static func webhook(_ options: [String: [String]], body: [UInt8]) throws {
        let secrets = try (options["secret"] ?? []).map { try WebhookSecret($0) }
        guard let timestamp = Int64(try one(options, "timestamp")) else { throw ProbeError("--timestamp is whole seconds") }
        let headers = try WebhookSignature.headers(id: one(options, "id"), timestamp: timestamp, body: body, secrets: secrets)
        emit(["headers": headers.map { [$0.name, $0.value] }])
    }

    static func decrypt(_ options: [String: [String]], body: Data) throws {
        guard let scalar = Base64URLCoding.decode(try one(options, "scalar")), let auth = Base64URLCoding.decode(try one(options, "auth")),
              let bytes = Data(base64Encoded: String(decoding: body, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines))
        else { throw ProbeError("--scalar and --auth are base64url, stdin is base64") }
        let notice = try WebPushDecryption.decrypt([UInt8](bytes), privateKey: P256PrivateKey(scalar: scalar), authSecret: auth)
        FileHandle.standardOutput.write(Data(notice))
    }

    /// `--name value` pairs (a name may repeat) and bare `--flag`s.
    static func parse(_ arguments: [String]) -> [String: [String]] {
        var options: [String: [String]] = [:]
        var index = 0
        while index < arguments.count {
            let argument = arguments[index]
            guard argument.hasPrefix("--") else { usage("unexpected \(argument)") }
            let name = String(argument.dropFirst(2))
            if name == "allow-loopback-http" {
                options[name] = []
                index += 1
                continue
            }
            guard index + 1 < arguments.count else { usage("--\(name) needs a value") }
            options[name, default: []].append(arguments[index + 1])
            index += 2
        }
        return options
    }

    static func one(_ options: [String: [String]], _ name: String) throws -> String {
        guard let values = options[name], values.count == 1 else { throw ProbeError("--\(name) once") }
        return values[0]
    }

    static func emit(_ object: [String: Any]) {
        let data = try! JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])
        FileHandle.standardOutput.write(data + Data("\n".utf8))
    }

    static func usage(_ message: String) -> Never {
        FileHandle.standardError.write(Data("vigil-push-probe: \(message) (see Tests/VigilPushProbe/main.swift)\n".utf8))
        exit(64)
    }
}

/// A bad option value, said as the probe's error.
struct ProbeError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

Probe.main()
