/// The header block of an HPUB / HMSG: `NATS/1.0[ status[ description]]`, CRLF, then `Key: Value`
/// lines, then an empty line (docs.nats.io, "Client protocol", HPUB and HMSG; ADR-4).
///
/// Keys keep their case and compare case-sensitively, as the server does; a key may repeat.
/// A status line (no responders `503`, JetStream's `100 Idle Heartbeat` and
/// `100 FlowControl Request`, `404`, `408`, `409`) is how the server speaks on a subscription.
public struct NATSHeaders: Equatable, Sendable {
    public var status: Int?
    public var statusDescription: String
    public var fields: [(name: String, value: String)]

    public init(status: Int? = nil, statusDescription: String = "", fields: [(name: String, value: String)] = []) {
        self.status = status
        self.statusDescription = statusDescription
        self.fields = fields
    }

    /// The first value of `name`.
    public subscript(name: String) -> String? {
        fields.first { $0.name == name }?.value
    }

    public static func == (lhs: NATSHeaders, rhs: NATSHeaders) -> Bool {
        lhs.status == rhs.status && lhs.statusDescription == rhs.statusDescription
            && lhs.fields.count == rhs.fields.count
            && zip(lhs.fields, rhs.fields).allSatisfy { $0.name == $1.name && $0.value == $1.value }
    }

    private static let version = Array("NATS/1.0".utf8)
    static let cr: UInt8 = 0x0D, lf: UInt8 = 0x0A

    // MARK: encode

    /// Appends the block, final empty line included. Keys must be visible ASCII without ':'; values
    /// may not hold CR or LF (a value with a newline would forge another header).
    public func encode(into out: inout [UInt8]) throws(NATSEncodeError) {
        out.append(contentsOf: Self.version)
        if let status {
            guard (100...999).contains(status) else { throw .invalidHeader("status \(status) is not three digits") }
            out.append(0x20)
            out.append(contentsOf: String(status).utf8)
            if !statusDescription.isEmpty {
                guard Self.isValue(statusDescription) else { throw .invalidHeader("status description holds a control character") }
                out.append(0x20)
                out.append(contentsOf: statusDescription.utf8)
            }
        }
        out.append(Self.cr); out.append(Self.lf)
        for field in fields {
            guard Self.isName(field.name) else { throw .invalidHeader("name '\(field.name.prefix(32))' is not a token") }
            guard Self.isValue(field.value) else { throw .invalidHeader("value of '\(field.name)' holds a control character") }
            out.append(contentsOf: field.name.utf8)
            out.append(UInt8(ascii: ":")); out.append(0x20)
            out.append(contentsOf: field.value.utf8)
            out.append(Self.cr); out.append(Self.lf)
        }
        out.append(Self.cr); out.append(Self.lf)
    }

    static func isName(_ name: String) -> Bool {
        !name.isEmpty && name.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: ":") }
    }

    static func isValue(_ value: String) -> Bool {
        value.utf8.allSatisfy { $0 >= 0x20 && $0 != 0x7F || $0 == 0x09 }
    }

    // MARK: decode

    /// Parses a complete block (what an HMSG's header size announced).
    public static func decode(_ block: ArraySlice<UInt8>) throws(NATSProtocolError) -> NATSHeaders {
        var lines: [ArraySlice<UInt8>] = []
        var at = block.startIndex
        var lineStart = at
        while at < block.endIndex {
            if block[at] == cr {
                guard at + 1 < block.endIndex, block[at + 1] == lf else { throw .badHeaders("CR not followed by LF") }
                lines.append(block[lineStart..<at])
                at += 2
                lineStart = at
            } else if block[at] == lf {
                throw .badHeaders("bare LF")
            } else {
                at += 1
            }
        }
        guard lineStart == block.endIndex else { throw .badHeaders("block does not end with CRLF") }
        guard lines.count >= 2, lines.last!.isEmpty else { throw .badHeaders("block does not end with an empty line") }
        var headers = NATSHeaders()
        let first = lines[0]
        guard first.starts(with: version) else { throw .badHeaders("does not start with NATS/1.0") }
        let rest = first.dropFirst(version.count)
        if !rest.isEmpty {
            guard rest.first == 0x20 else { throw .badHeaders("version not followed by a space") }
            let statusPart = rest.dropFirst().drop { $0 == 0x20 }
            let digits = statusPart.prefix { $0 != 0x20 }
            guard digits.count == 3, digits.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), digits.first != 0x30 else {
                throw .badHeaders("status is not three digits")
            }
            headers.status = Int(String(decoding: digits, as: UTF8.self))
            let description = statusPart.dropFirst(3).drop { $0 == 0x20 }
            guard let text = String(validating: description, as: UTF8.self), isValue(text) else {
                throw .badHeaders("status description is not printable UTF-8")
            }
            headers.statusDescription = text
        }
        for line in lines[1..<(lines.count - 1)] {
            guard let colon = line.firstIndex(of: UInt8(ascii: ":")) else { throw .badHeaders("line without ':'") }
            guard let name = String(validating: line[line.startIndex..<colon], as: UTF8.self), isName(name) else {
                throw .badHeaders("name is not a token")
            }
            let valueBytes = line[(colon + 1)...].drop { $0 == 0x20 || $0 == 0x09 }
            guard let value = String(validating: valueBytes, as: UTF8.self), isValue(value) else {
                throw .badHeaders("value of '\(name.prefix(32))' is not printable UTF-8")
            }
            headers.fields.append((name: name, value: value))
        }
        return headers
    }
}
