import VigilReplication
import VigilPush

/// The `push:` section (issue 24, docs/design/alerts.md): how vigild reaches the owner and members
/// of a circle who have no open connection. Two channels, each off until configured: Web Push
/// (the VAPID key, `vigild push keygen FILE`, and its contact) and the operator's webhook relay
/// (its URL and Standard Webhooks secret).
///
/// The paths and texts are as written (what `--print-config` shows); `load` reads the files into
/// `vapid` and `relay`, once, when the config is loaded, so a missing, open or malformed key
/// stops start-up and `--check-config` with the key's name, and what runs holds the keys
/// themselves, never a path to read again.
public struct PushConfig: Equatable, Sendable {
    /// The VAPID private key (PEM); empty: Web Push off.
    public var vapidKeyFile = ""
    /// The JWT's `sub`: `mailto:` or `https:`; required with a key.
    public var vapidSubject = ""
    /// The operator's webhook relay (https); empty: relay off.
    public var relayURL = ""
    /// Its Standard Webhooks secret, `whsec_…`; required with a relay.
    public var relaySecretFile = ""
    /// Plain http to loopback hosts, for push endpoints and the relay: the tests' stand-ins.
    public var allowLoopbackHTTP = false
    /// Endpoints whose address is private or link-local are refused at send time unless this is
    /// set (an attacker holding a member token must not make vigild POST into the operator's network).
    public var allowPrivateAddresses = false
    /// Deliveries waiting at once; past it new notices' work is refused (and counted).
    public var maxPending = 100_000
    /// How long a notice is retried before it expires (the push request's TTL).
    public var ttlSeconds = 86_400
    /// The channels a notice is first sent through (`webpush`, `relay`): both by default. An
    /// operator whose relay is an SMS gateway keeps it for the ladder's later steps.
    public var firstChannels = ["webpush", "relay"]
    /// The escalation ladder: a danger notice (a panic's start or escalation, a member's
    /// question) that nobody it went to has acknowledged `afterSeconds` after it was made is
    /// sent again through `channels` (docs/OPERATIONS.md, "Push"). In order of time; empty: none.
    public var escalation: [EscalationStep] = []

    /// One step of the ladder.
    public struct EscalationStep: Equatable, Sendable {
        public var afterSeconds: Int
        public var channels: [String]

        public init(afterSeconds: Int, channels: [String]) {
            self.afterSeconds = afterSeconds
            self.channels = channels
        }
    }

    /// The most steps a ladder may have.
    public static let maxEscalationSteps = 8
    /// The channel names the keys take.
    public static let channelNames = ["webpush", "relay"]

    /// The loaded key and its contact (nil: Web Push off).
    public internal(set) var vapid: VAPIDSigner?
    /// The loaded relay (nil: relay off).
    public internal(set) var relay: WebhookRelay?

    public init() {}

    /// Where notices for relay subscriptions go, and the key that signs them.
    public struct WebhookRelay: Equatable, Sendable {
        public let endpoint: PushEndpoint
        public let secret: WebhookSecret
    }

    /// What the application may accept subscriptions for (`V1Application.alertChannels`).
    public var channels: AlertChannels {
        AlertChannels(webPush: vapid != nil, relay: relay != nil, allowLoopbackHTTP: allowLoopbackHTTP)
    }

    /// Settings and paths as written, and the loaded keys by their public identity (a key is an
    /// OpenSSL object, compared by its public point).
    public static func == (a: PushConfig, b: PushConfig) -> Bool {
        a.vapidKeyFile == b.vapidKeyFile && a.vapidSubject == b.vapidSubject && a.relayURL == b.relayURL
            && a.relaySecretFile == b.relaySecretFile && a.allowLoopbackHTTP == b.allowLoopbackHTTP
            && a.allowPrivateAddresses == b.allowPrivateAddresses && a.maxPending == b.maxPending && a.ttlSeconds == b.ttlSeconds
            && a.firstChannels == b.firstChannels && a.escalation == b.escalation
            && a.vapid?.applicationServerKey == b.vapid?.applicationServerKey && a.vapid?.subject == b.vapid?.subject
            && a.relay == b.relay
    }

    /// The rules between the section's keys, checked before any file is read; each issue names its key.
    func issues() -> [ConfigIssue] {
        var issues: [ConfigIssue] = []
        if let unknown = firstChannels.first(where: { !Self.channelNames.contains($0) }) {
            issues.append(ConfigIssue(key: "push.first_channels", message: "lists \"\(unknown)\": the channels are webpush and relay"))
        }
        for (i, step) in escalation.enumerated() where i > 0 && step.afterSeconds <= escalation[i - 1].afterSeconds {
            issues.append(ConfigIssue(key: "push.escalation", message: "step \(i + 1) comes at \(step.afterSeconds) s, not after step \(i)'s \(escalation[i - 1].afterSeconds) s: list the steps in order of time"))
        }
        if let last = escalation.last, last.afterSeconds >= ttlSeconds {
            issues.append(ConfigIssue(key: "push.escalation", message: "its last step (\(last.afterSeconds) s) comes after a notice's time to live (push.ttl_s, \(ttlSeconds) s): it would never be sent"))
        }
        if !vapidKeyFile.isEmpty && vapidSubject.isEmpty {
            issues.append(ConfigIssue(key: "push.vapid_subject", message: "is required with push.vapid_key_file: the push services' contact, mailto:ADDRESS or https://HOST/…"))
        }
        if !vapidSubject.isEmpty, (try? VAPIDSubject(vapidSubject)) == nil {
            issues.append(ConfigIssue(key: "push.vapid_subject", message: "must be mailto:ADDRESS or https://HOST/…, in visible ASCII, at most \(VAPIDSubject.maxByteCount) bytes"))
        }
        if !relayURL.isEmpty {
            do {
                _ = try PushEndpoint(relayURL, allowLoopbackHTTP: allowLoopbackHTTP)
            } catch {
                issues.append(ConfigIssue(key: "push.relay_url", message: "\(error) (http only to a loopback host, and only with push.allow_loopback_http)"))
            }
            if relaySecretFile.isEmpty {
                issues.append(ConfigIssue(key: "push.relay_secret_file", message: "is required with push.relay_url: the file holding the relay's whsec_… secret"))
            }
        } else if !relaySecretFile.isEmpty {
            issues.append(ConfigIssue(key: "push.relay_url", message: "is required with push.relay_secret_file: where the relay listens (https://…)"))
        }
        return issues
    }

    /// Reads the key and the secret (each only when its channel is configured), naming the file in
    /// every error. Call after `issues()` found none.
    mutating func load() -> [ConfigIssue] {
        vapid = nil
        relay = nil
        var issues: [ConfigIssue] = []
        if !vapidKeyFile.isEmpty {
            do {
                let key = try VAPIDKeyFile.read(vapidKeyFile)
                vapid = VAPIDSigner(key: key, subject: try VAPIDSubject(vapidSubject))
            } catch .key(let error) {
                issues.append(ConfigIssue(key: "push.vapid_key_file", message: "\(vapidKeyFile): not a P-256 private key in PEM: \(error)"))
            } catch {
                issues.append(ConfigIssue(key: "push.vapid_key_file", message: "\(error)"))
            }
        }
        if !relayURL.isEmpty {
            do {
                let bytes = try ReplicationSettings.readSecretFile(relaySecretFile, key: "push.relay_secret_file")
                let text = String(decoding: bytes, as: UTF8.self).trimmingASCIIWhitespace
                let secret: WebhookSecret
                do { secret = try WebhookSecret(text) } catch {
                    throw SecretFileError(key: "push.relay_secret_file", message: "\(relaySecretFile): \(error)")
                }
                relay = WebhookRelay(endpoint: try PushEndpoint(relayURL, allowLoopbackHTTP: allowLoopbackHTTP), secret: secret)
            } catch let error as SecretFileError {
                issues.append(ConfigIssue(key: error.key, message: error.message))
            } catch {
                issues.append(ConfigIssue(key: "push.relay_url", message: "\(error)"))
            }
        }
        return issues
    }
}

/// The channels `checkin.register` may register subscriptions for: Web Push with a VAPID key,
/// the relay with a relay, and whether plain http to loopback endpoints is allowed (tests).
public struct AlertChannels: Equatable, Sendable {
    public var webPush: Bool
    public var relay: Bool
    public var allowLoopbackHTTP: Bool
}

extension String {
    /// Without leading and trailing spaces, tabs and line ends (a secret file's final newline).
    fileprivate var trimmingASCIIWhitespace: String {
        let isSpace: (Character) -> Bool = { $0 == " " || $0 == "\t" || $0 == "\n" || $0 == "\r" }
        return String(drop(while: isSpace).reversed().drop(while: isSpace).reversed())
    }
}
