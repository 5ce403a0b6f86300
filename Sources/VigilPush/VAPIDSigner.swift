/// Signs VAPID tokens (RFC 8292) with the application server's key, and writes the
/// `Authorization` header value a push request carries: `vapid t=<JWT>, k=<public key>` (§3).
///
/// The JWT is base64url(header) "." base64url(claims) "." base64url(r ‖ s), ES256 over the first
/// two parts (RFC 7515 §5.1, RFC 7518 §3.4). `k` is the key's uncompressed point in base64url, the
/// same text as the `applicationServerKey` the browsers subscribed with: a push service compares
/// the two and refuses a request signed by another key.
public struct VAPIDSigner: Sendable {
    /// RFC 8292 §2: a push service refuses an `exp` more than 24 hours after the request.
    public static let maxLifetime: Int64 = 24 * 3600
    /// Half the maximum, so a clock a little ahead of the push service's does not get refused.
    public static let defaultLifetime: Int64 = 12 * 3600

    public let key: P256PrivateKey
    public let subject: VAPIDSubject

    public init(key: P256PrivateKey, subject: VAPIDSubject) {
        self.key = key
        self.subject = subject
    }

    /// The public key as browsers take it (`PushManager.subscribe({applicationServerKey})`).
    public var applicationServerKey: String { key.publicKey.base64URL }

    /// The signed JWT for `claims`.
    public func token(_ claims: VAPIDClaims) throws(VAPIDError) -> String {
        let signingInput = Base64URLCoding.encode(VAPIDClaims.headerJSON) + "." + Base64URLCoding.encode(claims.json)
        let der: [UInt8]
        do { der = try key.signatureDER(of: Array(signingInput.utf8)) } catch { throw .key(error) }
        let raw: [UInt8]
        do { raw = try ECDSASignature.raw(der: der) } catch { throw .signature(error) }
        return signingInput + "." + Base64URLCoding.encode(raw)
    }

    /// The `Authorization` value for a request to `endpoint` at `now` (seconds since the epoch):
    /// a token for the endpoint's origin that expires `lifetime` seconds later.
    public func authorization(for endpoint: PushEndpoint, now: Int64, lifetime: Int64 = defaultLifetime) throws(VAPIDError) -> String {
        guard lifetime > 0, lifetime <= Self.maxLifetime else { throw .badLifetime(lifetime) }
        let claims = VAPIDClaims(audience: endpoint.origin, expiry: now + lifetime, subject: subject)
        return "vapid t=\(try token(claims)), k=\(applicationServerKey)"
    }
}
