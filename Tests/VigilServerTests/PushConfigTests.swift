import Foundation
import Testing
import VigilCore
import VigilPush
@testable import VigilServer

/// The `push:` section: its keys, the rules between them, the files read when the config is
/// loaded (each error naming its key and file), `--print-config`, and `/site.json`'s public key.
@Suite struct PushConfigTests {
    /// A directory with a VAPID key (`vigild push keygen`'s file) and a relay secret, both mode 600.
    final class Files {
        let path: String
        let key: P256PrivateKey
        let secret = WebhookSecret.generate()

        init() throws {
            path = NSTemporaryDirectory() + "vigil-push-config-\(getpid())-\(UUID().uuidString)"
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false)
            key = try VAPIDKeyFile.create(path + "/vapid.pem")
            try write("relay.secret", secret.text + "\n", mode: 0o600)
        }

        deinit { try? FileManager.default.removeItem(atPath: path) }

        var keyFile: String { path + "/vapid.pem" }
        var secretFile: String { path + "/relay.secret" }

        func write(_ name: String, _ text: String, mode: Int) throws {
            FileManager.default.createFile(atPath: path + "/" + name, contents: Data(text.utf8), attributes: [.posixPermissions: mode])
        }
    }

    static func issues(_ yaml: String) -> [String] {
        do {
            _ = try ConfigLoader.load(yaml: yaml)
            return []
        } catch let error as ConfigError {
            return error.issues.map(\.description)
        } catch {
            return ["\(error)"]
        }
    }

    @Test func withoutTheSectionEveryChannelIsOff() throws {
        let c = try ConfigLoader.load(yaml: "")
        #expect(c.push == PushConfig() && c.push.vapid == nil && c.push.relay == nil)
        #expect(c.push.channels == AlertChannels(webPush: false, relay: false, allowLoopbackHTTP: false))
        #expect(c.push.maxPending == 100_000 && c.push.ttlSeconds == 86_400 && !c.push.allowPrivateAddresses)
        #expect(c.checkin.maxSubscriptionsPerHolder == 5)
    }

    @Test func theKeyAndTheSecretAreLoadedWithTheConfig() throws {
        let f = try Files()
        let c = try ConfigLoader.load(yaml: """
        push:
          vapid_key_file: \(f.keyFile)
          vapid_subject: mailto:ops@example.org
          relay_url: http://127.0.0.1:9/hook
          relay_secret_file: \(f.secretFile)
          allow_loopback_http: true
          allow_private_addresses: true
          max_pending: 50
          ttl_s: 600
        checkin:
          max_subscriptions_per_holder: 3
        """)
        #expect(c.push.vapid?.applicationServerKey == f.key.publicKey.base64URL && c.push.vapid?.subject.uri == "mailto:ops@example.org")
        #expect(c.push.relay?.secret == f.secret && c.push.relay?.endpoint.origin == "http://127.0.0.1:9" && c.push.relay?.endpoint.requestTarget == "/hook")
        #expect(c.push.channels == AlertChannels(webPush: true, relay: true, allowLoopbackHTTP: true))
        #expect(c.push.allowPrivateAddresses && c.push.maxPending == 50 && c.push.ttlSeconds == 600 && c.checkin.maxSubscriptionsPerHolder == 3)
        // --print-config shows the paths (never the keys) and reads back to the same config.
        let printed = ConfigLoader.yaml(c)
        #expect(printed.contains("vapid_key_file: \"\(f.keyFile)\"") && !printed.contains(f.secret.text.dropFirst(6)))
        #expect(try ConfigLoader.load(yaml: printed) == c)
    }

    @Test func eachMistakeIsNamedByItsKey() throws {
        let f = try Files()
        try f.write("open.pem", String(decoding: try Data(contentsOf: URL(fileURLWithPath: f.keyFile)), as: UTF8.self), mode: 0o644)
        try f.write("junk.pem", "not a key\n", mode: 0o600)
        try f.write("bad.secret", "whsec_short\n", mode: 0o600)
        let cases: [(String, String)] = [
            ("vapid_key_file: \(f.keyFile)", "push.vapid_subject: is required with push.vapid_key_file"),
            ("vapid_key_file: \(f.keyFile)\n  vapid_subject: ops@example.org", "push.vapid_subject: must be mailto:ADDRESS or https://HOST/…"),
            ("vapid_key_file: \(f.path)/missing.pem\n  vapid_subject: mailto:a@b.c", "push.vapid_key_file: open \(f.path)/missing.pem: No such file or directory"),
            ("vapid_key_file: \(f.path)/open.pem\n  vapid_subject: mailto:a@b.c", "push.vapid_key_file: \(f.path)/open.pem: readable or writable by every user"),
            ("vapid_key_file: \(f.path)/junk.pem\n  vapid_subject: mailto:a@b.c", "push.vapid_key_file: \(f.path)/junk.pem: not a P-256 private key in PEM"),
            ("relay_url: https://relay.example/hook", "push.relay_secret_file: is required with push.relay_url"),
            ("relay_secret_file: \(f.secretFile)", "push.relay_url: is required with push.relay_secret_file"),
            ("relay_url: http://127.0.0.1:9/hook\n  relay_secret_file: \(f.secretFile)", "push.relay_url: endpoint scheme http is not allowed"),
            ("relay_url: http://relay.example/hook\n  relay_secret_file: \(f.secretFile)\n  allow_loopback_http: true", "push.relay_url: endpoint scheme http is not allowed"),
            ("relay_url: https://relay.example/hook\n  relay_secret_file: \(f.path)/bad.secret", "push.relay_secret_file: \(f.path)/bad.secret: "),
            ("relay_url: https://relay.example/hook\n  relay_secret_file: \(f.path)/none", "push.relay_secret_file: \(f.path)/none: No such file or directory"),
            ("ttl_s: 0", "push.ttl_s (line 2): must be between 1 and 2419200"),
            ("max_pending: 0", "push.max_pending (line 2): must be between 1 and 100000000"),
            ("allow_loopback_http: maybe", "push.allow_loopback_http (line 2): must be true or false"),
            ("vapid_file: x", "push.vapid_file"),
        ]
        for (body, expected) in cases {
            let found = Self.issues("push:\n  \(body)\n")
            #expect(found.count == 1 && found[0].hasPrefix(expected), "\(body): \(found)")
            #expect(!found.joined().contains(f.secret.text.dropFirst(6)), "a secret in an error")
        }
        #expect(Self.issues("checkin:\n  max_subscriptions_per_holder: 0\n").first?.hasPrefix("checkin.max_subscriptions_per_holder") == true)
    }

    @Test func theLadderIsReadCheckedAndPrintedBack() throws {
        let c = try ConfigLoader.load(yaml: """
        push:
          first_channels: [webpush]
          escalation: [{after_s: 120, channels: [webpush]}, {after_s: 300, channels: [relay, webpush]}]
        """)
        #expect(c.push.firstChannels == ["webpush"])
        #expect(c.push.escalation == [PushConfig.EscalationStep(afterSeconds: 120, channels: ["webpush"]),
                                      PushConfig.EscalationStep(afterSeconds: 300, channels: ["relay", "webpush"])])
        #expect(try ConfigLoader.load(yaml: ConfigLoader.yaml(c)) == c)
        let cases: [(String, String)] = [
            ("first_channels: [sms]", "push.first_channels: lists \"sms\""),
            ("escalation: [{after_s: 300, channels: [relay]}, {after_s: 120, channels: [webpush]}]", "push.escalation: step 2 comes at 120 s"),
            ("ttl_s: 600\n  escalation: [{after_s: 600, channels: [relay]}]", "push.escalation: its last step (600 s) comes after"),
            ("escalation: [{after_s: 0, channels: [relay]}]", "push.escalation (line 2): step 1: after_s must be whole seconds"),
            ("escalation: [{after_s: 60, channels: []}]", "push.escalation (line 2): step 1: channels must list"),
            ("escalation: [{after_s: 60, channels: [relay, relay]}]", "push.escalation (line 2): step 1: channels must list"),
            ("escalation: [{after_s: 60}]", "push.escalation (line 2): step 1: needs after_s and channels"),
            ("escalation: [{after_s: 60, channels: [relay], when: 1}]", "push.escalation (line 2): step 1: unknown key \"when\""),
            ("escalation: 5", "push.escalation (line 2): must be a list of steps"),
            ("escalation: [\(Array(repeating: "{after_s: 1, channels: [relay]}", count: 9).joined(separator: ", "))]",
             "push.escalation (line 2): lists at most 8 steps"),
        ]
        for (body, expected) in cases {
            let found = Self.issues("push:\n  \(body)\n")
            #expect(found.count == 1 && found[0].hasPrefix(expected), "\(body): \(found)")
        }
    }

    @Test func siteJSONCarriesThePublicKeyOnlyWithAKey() throws {
        let f = try Files()
        var config = ServerConfig()
        #expect(!String(decoding: StaticSiteLoader.siteJSON(config, leaflet: false), as: UTF8.self).contains("push_public_key"))
        config.push.vapid = VAPIDSigner(key: f.key, subject: try VAPIDSubject("mailto:a@b.c"))
        let json = try JSONParser.parse(StaticSiteLoader.siteJSON(config, leaflet: false)).object
        #expect(json?["push_public_key"]?.string == f.key.publicKey.base64URL && f.key.publicKey.base64URL.count == 87)
    }
}
