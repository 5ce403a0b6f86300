/// Decoding of the end-to-end encrypted fields (docs/design/e2e-streams.md): `panic.start`'s
/// `e2e` object, a sealed `panic.update` and `panic.rekey`.
///
/// Called by `decodePanic` (RequestDecoder+Panic.swift).
///
/// Every value is hostile: sizes are checked before anything is decoded, each failure has its
/// own code and names its field, and no error message echoes a sealed value, a box or a key id.

/// A sealed `panic.update`: the location sealed for `seq` and `status`, which must be the
/// stream's next seq and its current status (`SealedSeqCheck`).
public struct SealedUpdate: Equatable, Sendable {
    /// The point, with the status it was sealed for.
    public var point: SealedPoint
    public var seq: UInt64
    public var status: PanicStatus { point.status }

    public init(point: SealedPoint, seq: UInt64) {
        self.point = point
        self.seq = seq
    }
}

extension RequestDecoder {
    /// The clear location fields an e2e request must not carry: a client that sends one next to
    /// a sealed value would put on the server what the stream is meant to hide.
    static let clearLocationFields = ["lat", "lon", "accuracy_m", "heading", "speed_mps", "note"]

    /// The members of `panic.start`'s `e2e` object.
    static let e2eStartFields = ["v", "kid", "sealed", "boxes"]

    /// `panic.start`'s `e2e` object, or nil when there is none. With it, none of the clear
    /// location fields may be given (`invalid_e2e`). `circle` says whether the start is for a
    /// circle: only then may it carry `boxes`.
    func e2eStart(_ o: JSONObject, forCircle circle: Bool) throws -> E2EStart? {
        guard let value = o["e2e"] else { return nil }
        guard let e = value.object else { throw RequestError("invalid_e2e", field: "e2e", "e2e must be an object") }
        for member in e.members where !Self.e2eStartFields.contains(member.key) {
            throw RequestError.unknownField("e2e." + String(member.key.prefix(32)))
        }
        try refuseClearLocation(o)
        guard let v = e["v"] else { throw RequestError.missing("e2e.v") }
        guard v.int64 == Int64(E2EStart.version) else {
            throw RequestError("unsupported_e2e_version", field: "e2e.v", "this server knows e2e format version \(E2EStart.version) only")
        }
        let kid = try keyID(e, "kid", path: "e2e.kid")
        let sealed = try sealedValue(e, "sealed", path: "e2e.sealed")
        var boxes: [MemberBox] = []
        if let b = e["boxes"] {
            guard circle else {
                throw RequestError("invalid_boxes", field: "e2e.boxes", "boxes are for a stream started for a circle")
            }
            boxes = try memberBoxes(b, path: "e2e.boxes")
        }
        return E2EStart(keys: E2EKeys(kid: kid, boxes: boxes), sealed: sealed)
    }

    /// A sealed `panic.update` (`sealed`, `kid`, `seq`, `status`, all required together), or nil
    /// when `sealed` is absent (a clear update).
    func sealedUpdate(_ o: JSONObject) throws -> SealedUpdate? {
        guard o["sealed"] != nil else {
            for name in ["kid", "seq", "status"] where o[name] != nil {
                throw RequestError("invalid_e2e", field: name, "\(name) belongs to a sealed update: a clear update carries none")
            }
            return nil
        }
        let sealed = try sealedValue(o, "sealed", path: "sealed")
        try refuseClearLocation(o)
        let kid = try keyID(o, "kid", path: "kid")
        guard let s = o["seq"] else { throw RequestError.missing("seq") }
        guard let n = s.int64, n >= 1 else { throw RequestError("invalid_seq", field: "seq", "seq must be a positive integer") }
        return SealedUpdate(point: SealedPoint(kid: kid, status: try panicStatus(o), sealed: sealed), seq: UInt64(n))
    }

    /// `panic.rekey`'s new key: its id and the boxes of the members that keep it (possibly none).
    func rekeyKeys(_ o: JSONObject) throws -> E2EKeys {
        let kid = try keyID(o, "kid", path: "kid")
        var boxes: [MemberBox] = []
        if let b = o["boxes"] { boxes = try memberBoxes(b, path: "boxes") }
        return E2EKeys(kid: kid, boxes: boxes)
    }

    func refuseClearLocation(_ o: JSONObject) throws {
        for name in Self.clearLocationFields where o[name] != nil {
            throw RequestError("invalid_e2e", field: name, "an end-to-end encrypted stream carries its location sealed: \(name) is not allowed")
        }
    }

    func keyID(_ o: JSONObject, _ name: String, path: String) throws -> E2EKeyID {
        guard let v = o[name] else { throw RequestError.missing(path) }
        guard let text = v.string, let kid = E2EKeyID(text) else {
            throw RequestError("invalid_kid", field: path, "\(path) must be 16 bytes in unpadded base64url (22 characters)")
        }
        return kid
    }

    func sealedValue(_ o: JSONObject, _ name: String, path: String) throws -> SealedBytes {
        guard let v = o[name] else { throw RequestError.missing(path) }
        guard let text = v.string else { throw RequestError("invalid_sealed", field: path, "\(path) must be a string") }
        switch SealedBytes.parse(text, maxBytes: panic.sealedMaxBytes) {
        case .success(let sealed): return sealed
        case .failure(.tooLarge):
            throw RequestError("sealed_too_large", field: path, "\(path) is larger than \(panic.sealedMaxBytes) bytes")
        case .failure(.tooShort):
            throw RequestError("invalid_sealed", field: path, "\(path) is shorter than a nonce and a tag")
        case .failure(.notBase64URL):
            throw RequestError("invalid_sealed", field: path, "\(path) must be unpadded base64url")
        }
    }

    /// `[{"member":N,"box":"…"}]`: at most `checkin.maxMembers` boxes (a circle has no more
    /// members), each member number once.
    func memberBoxes(_ value: JSONValue, path: String) throws -> [MemberBox] {
        guard let items = value.array else { throw RequestError("invalid_boxes", field: path, "\(path) must be an array") }
        guard items.count <= checkin.maxMembers else {
            throw RequestError("invalid_boxes", field: path, "\(path) holds more boxes than a circle has members (\(checkin.maxMembers))")
        }
        var boxes: [MemberBox] = []
        var seen = Set<UInt32>()
        for (i, item) in items.enumerated() {
            let at = "\(path)[\(i)]"
            guard let b = item.object else { throw RequestError("invalid_boxes", field: at, "each box is an object") }
            for member in b.members where member.key != "member" && member.key != "box" {
                throw RequestError.unknownField(at + "." + String(member.key.prefix(32)))
            }
            guard let m = b["member"] else { throw RequestError.missing(at + ".member") }
            guard let n = m.int64, n >= 1, n <= Int64(UInt32.max) else {
                throw RequestError("invalid_boxes", field: at + ".member", "member must be a circle member's number")
            }
            guard seen.insert(UInt32(n)).inserted else {
                throw RequestError("invalid_boxes", field: at + ".member", "each member has one box")
            }
            boxes.append(MemberBox(member: UInt32(n), box: try sealedValue(b, "box", path: at + ".box")))
        }
        return boxes
    }
}
