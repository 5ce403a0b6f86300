import VigilCore

/// The fields of a server's INFO that the client acts on (docs.nats.io, "Client protocol", INFO).
/// Unknown fields are ignored; the client's address, which INFO also carries, is not kept.
public struct NATSServerInfo: Equatable, Sendable {
    public var serverID: String
    public var serverName: String
    public var version: String
    /// Largest payload (headers included) the server accepts, and so the most we let it send us.
    public var maxPayload: Int
    public var headers: Bool
    public var authRequired: Bool
    public var tlsRequired: Bool
    /// The server accepts TLS but does not require it (`allow_non_tls`).
    public var tlsAvailable: Bool
    /// A challenge to sign with the client's nkey (servers with nkey or JWT users send one):
    /// at most `maxNonceBytes`, printable ASCII, "" when absent.
    public var nonce: String
    public var jetStream: Bool
    /// Other servers of its cluster a client may reconnect to (`host:port`).
    public var connectURLs: [String]
    /// Lame-duck mode: the server is shutting down and asks clients to move.
    public var lameDuck: Bool

    public init(serverID: String = "", serverName: String = "", version: String = "", maxPayload: Int = 1_048_576,
                headers: Bool = true, authRequired: Bool = false, tlsRequired: Bool = false, jetStream: Bool = false,
                connectURLs: [String] = [], lameDuck: Bool = false, tlsAvailable: Bool = false, nonce: String = "") {
        self.serverID = serverID
        self.serverName = serverName
        self.version = version
        self.maxPayload = maxPayload
        self.headers = headers
        self.authRequired = authRequired
        self.tlsRequired = tlsRequired
        self.tlsAvailable = tlsAvailable
        self.nonce = nonce
        self.jetStream = jetStream
        self.connectURLs = connectURLs
        self.lameDuck = lameDuck
    }

    /// Most connect URLs kept from one INFO (a cluster of more is not what Vigil runs).
    public static let maxConnectURLs = 64
    /// Longest nonce accepted (nats-server sends 22 characters).
    public static let maxNonceBytes = 256

    /// Decodes INFO's JSON document. `max_payload` must be a positive integer; it is capped by
    /// `payloadCap`, the most this client will ever buffer for one message.
    public static func decode(_ json: ArraySlice<UInt8>, payloadCap: Int) throws(NATSProtocolError) -> NATSServerInfo {
        let value: JSONValue
        do {
            value = try JSONParser.parse(Array(json), maxDepth: 8)
        } catch {
            throw .badInfo(error.message)
        }
        guard let object = value.object else { throw .badInfo("not a JSON object") }
        var info = NATSServerInfo()
        info.serverID = object["server_id"]?.string ?? ""
        info.serverName = object["server_name"]?.string ?? ""
        info.version = object["version"]?.string ?? ""
        guard let maxPayload = object["max_payload"]?.int64, maxPayload > 0 else {
            throw .badInfo("max_payload missing or not a positive integer")
        }
        info.maxPayload = Int(min(maxPayload, Int64(payloadCap)))
        info.headers = object["headers"]?.bool ?? false
        info.authRequired = object["auth_required"]?.bool ?? false
        info.tlsRequired = object["tls_required"]?.bool ?? false
        info.tlsAvailable = object["tls_available"]?.bool ?? false
        if let nonce = object["nonce"]?.string {
            guard nonce.utf8.count <= maxNonceBytes, nonce.utf8.allSatisfy({ $0 > 32 && $0 < 127 }) else {
                throw .badInfo("nonce longer than \(maxNonceBytes) bytes or not printable ASCII")
            }
            info.nonce = nonce
        }
        info.jetStream = object["jetstream"]?.bool ?? false
        info.lameDuck = object["ldm"]?.bool ?? false
        if let urls = object["connect_urls"]?.array {
            info.connectURLs = urls.prefix(maxConnectURLs).compactMap(\.string)
        }
        return info
    }
}
