/// A NATS `.creds` file (what `nsc` writes for a user in operator/JWT mode): the user's JWT and
/// its nkey seed, each on its own line between marker lines of dashes:
///
///     -----BEGIN NATS USER JWT-----
///     eyJ0eXAiOiJKV1QiLCJhbGciOiJlZDI1NTE5LW5rZXkifQ.eyJ...
///     ------END NATS USER JWT------
///     (free text)
///     -----BEGIN USER NKEY SEED-----
///     SUAM...
///     ------END USER NKEY SEED------
///
/// The rule (the one the Go and C clients follow): a line starting and ending with at least three
/// dashes opens a block, the next line is its content, the line after must be a marker again;
/// the first block is the JWT, the second the seed. Everything else is ignored. Bounded: a file
/// of at most `maxBytes`, a JWT of at most `maxJWTBytes`. Errors name what is wrong and never
/// quote the file (it holds a secret).
public struct NATSCredentials: Equatable, Sendable {
    public var jwt: String
    public var seed: NKey.Seed

    public init(jwt: String, seed: NKey.Seed) {
        self.jwt = jwt
        self.seed = seed
    }

    public static let maxBytes = 65_536
    public static let maxJWTBytes = 16_384

    public static func parse(_ bytes: some Collection<UInt8>) throws(NATSCredentialsError) -> NATSCredentials {
        guard bytes.count <= maxBytes else { throw .tooLarge(limit: maxBytes) }
        var lines: [ArraySlice<UInt8>] = []
        var line: [UInt8] = []
        for b in bytes {
            if b == 10 {
                lines.append(trimmed(line[...]))
                line.removeAll(keepingCapacity: true)
            } else {
                line.append(b)
            }
        }
        lines.append(trimmed(line[...]))
        var blocks: [ArraySlice<UInt8>] = []
        var i = 0
        while i + 2 < lines.count && blocks.count < 2 {
            if isMarker(lines[i]) && !lines[i + 1].isEmpty && !isMarker(lines[i + 1]) && isMarker(lines[i + 2]) {
                blocks.append(lines[i + 1])
                i += 3
            } else {
                i += 1
            }
        }
        guard blocks.count == 2 else { throw .missingBlock(blocks.isEmpty ? "the user JWT" : "the nkey seed") }
        let jwt = blocks[0]
        guard jwt.count <= maxJWTBytes else { throw .badJWT("longer than \(maxJWTBytes) bytes") }
        guard isJWT(jwt) else { throw .badJWT("not three base64url parts separated by dots") }
        let seed: NKey.Seed
        do {
            seed = try NKey.decodeSeed(String(decoding: blocks[1], as: UTF8.self))
        } catch {
            throw .badSeed(error)
        }
        guard seed.role == .user else { throw .badSeed(.unknownRole) }
        return NATSCredentials(jwt: String(decoding: jwt, as: UTF8.self), seed: seed)
    }

    /// A line of at least three dashes at each end (`-----BEGIN NATS USER JWT-----`).
    static func isMarker(_ line: ArraySlice<UInt8>) -> Bool {
        line.count >= 6 && line.prefix(3).allSatisfy { $0 == 45 } && line.suffix(3).allSatisfy { $0 == 45 }
    }

    /// `header.claims.signature`, each non-empty base64url (A-Z a-z 0-9 - _).
    public static func isJWT(_ text: ArraySlice<UInt8>) -> Bool {
        let parts = text.split(separator: 46, omittingEmptySubsequences: false)
        return parts.count == 3 && parts.allSatisfy { part in
            !part.isEmpty && part.allSatisfy { ($0 >= 65 && $0 <= 90) || ($0 >= 97 && $0 <= 122) || ($0 >= 48 && $0 <= 57) || $0 == 45 || $0 == 95 }
        }
    }

    static func trimmed(_ s: ArraySlice<UInt8>) -> ArraySlice<UInt8> {
        var s = s
        while let f = s.first, NKey.isSpace(f) { s = s.dropFirst() }
        while let l = s.last, NKey.isSpace(l) { s = s.dropLast() }
        return s
    }
}

public enum NATSCredentialsError: Error, Equatable, Sendable, CustomStringConvertible {
    case tooLarge(limit: Int)
    case missingBlock(String)
    case badJWT(String)
    case badSeed(NKeyError)

    public var description: String {
        switch self {
        case .tooLarge(let limit): return "larger than \(limit) bytes: not a .creds file"
        case .missingBlock(let what): return "\(what) is missing (a .creds file holds the user JWT, then the nkey seed, each between ----- marker lines)"
        case .badJWT(let why): return "the user JWT is malformed: \(why)"
        case .badSeed(let error): return "the nkey seed is unusable: \(error)"
        }
    }
}
