import VigilCore

/// What the client says in CONNECT (docs.nats.io, "Client protocol", CONNECT).
///
/// Vigil always asks for: no `+OK` per operation (`verbose` false), no strict subject checking
/// (`pedantic` false: our subjects are checked before they are sent), headers (JetStream's
/// message ids and status messages need them), `no_responders` (a request nobody answers fails at
/// once with a 503 status instead of waiting for its timeout) and protocol 1 (the server may
/// send INFO again when its cluster changes).
public struct NATSConnectOptions: Equatable, Sendable {
    public enum Credentials: Equatable, Sendable {
        case none
        case userPassword(user: String, password: String)
        case token(String)
        /// An nkey user: its public key (`U...`) in CONNECT, with the server nonce's signature
        /// made with `seed` (which never leaves the client).
        case nkey(publicKey: String, seed: NKey.Seed)
        /// A JWT user (a `.creds` file): its JWT in CONNECT, with the nonce's signature made with
        /// the file's seed.
        case jwt(String, seed: NKey.Seed)

        /// The seed that signs the server's nonce, for the credentials that need one.
        public var signingSeed: NKey.Seed? {
            switch self {
            case .nkey(_, let seed), .jwt(_, let seed): return seed
            default: return nil
            }
        }

        /// What kind of credentials, without them: safe to log.
        public var kind: String {
            switch self {
            case .none: return "none"
            case .userPassword: return "user/password"
            case .token: return "token"
            case .nkey: return "nkey"
            case .jwt: return "creds (JWT + nkey)"
            }
        }
    }

    /// Shown in the server's monitoring (`connz`): which vigild this connection belongs to.
    public var name: String
    public var credentials: Credentials
    public var tlsRequired: Bool
    public var version: String

    public init(name: String, credentials: Credentials = .none, tlsRequired: Bool = false, version: String = "0") {
        self.name = name
        self.credentials = credentials
        self.tlsRequired = tlsRequired
        self.version = version
    }

    /// Appends `CONNECT {...}\r\n`; `signature` is the base64url Ed25519 signature of the INFO's
    /// nonce, for the nkey and JWT credentials. The credentials go to the server and nowhere else:
    /// never log these bytes.
    public func encode(into out: inout [UInt8], signature: String? = nil) {
        var json = JSONWriter(capacity: 256)
        json.beginObject()
        json.field("verbose", false)
        json.field("pedantic", false)
        json.field("tls_required", tlsRequired)
        json.field("name", name)
        json.field("lang", "swift")
        json.field("version", version)
        json.field("protocol", Int64(1))
        json.field("headers", true)
        json.field("no_responders", true)
        switch credentials {
        case .none:
            break
        case .userPassword(let user, let password):
            json.field("user", user)
            json.field("pass", password)
        case .token(let token):
            json.field("auth_token", token)
        case .nkey(let publicKey, _):
            json.field("nkey", publicKey)
        case .jwt(let jwt, _):
            json.field("jwt", jwt)
        }
        if let signature { json.field("sig", signature) }
        json.endObject()
        out.append(contentsOf: "CONNECT ".utf8)
        json.withUnsafeBytes { out.append(contentsOf: $0) }
        out.append(contentsOf: "\r\n".utf8)
    }
}
