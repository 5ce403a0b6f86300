/// End-to-end encrypted panic streams (docs/design/e2e-streams.md): the values the server holds
/// for them, as opaque bytes it checks the form and size of and never looks inside.
///
/// Pure model: no sockets, no clock, no crypto. The server never holds a key, so there is nothing
/// here that could open a sealed value; what it checks is the base64url, the size cap
/// (`PanicSettings.sealedMaxBytes`), the key id's form and, for updates, the seq/status rule
/// (`SealedSeqCheck`).

/// A stream key's id (`kid`): 16 random bytes made with the key on the owner's device, sent as
/// 22 characters of unpadded base64url. It names a key and is no secret, but it links updates to
/// one stream, so logs never show it (`description`). One text per value: the last character's
/// unused low 4 bits must be zero, as for stream ids.
public struct E2EKeyID: Hashable, Sendable, CustomStringConvertible {
    /// The 22 characters, as sent and as placed in the associated data.
    public let text: String

    /// Nil for anything but the canonical 22-character base64url form of 16 bytes.
    public init?(_ text: String) {
        guard text.utf8.count == 22, StreamID(text) != nil else { return nil }
        self.text = text
    }

    /// The 16 bytes the text stands for.
    public init(bytes: [UInt8]) {
        precondition(bytes.count == 16, "a key id is 16 bytes")
        self.text = Base64URL.encode(bytes)
    }

    /// The 16 bytes (the text is canonical, so this always succeeds).
    public var bytes: [UInt8] { Base64URL.decode(text) ?? [] }

    /// Not the text: an id interpolated into a log line shows nothing that links it to a stream.
    public var description: String { "<kid>" }
}

/// A sealed value: `nonce (12) ‖ ciphertext ‖ tag (16)` of AES-256-GCM, opaque to the server.
/// Its `description` shows the size only, so a sealed value interpolated into a log line or an
/// error shows nothing of its bytes.
public struct SealedBytes: Equatable, Sendable, CustomStringConvertible {
    public let bytes: [UInt8]

    /// The smallest value of the format: a nonce and a tag around nothing. Clients pad the
    /// plaintext to a multiple of 64 bytes, so real values are at least 92 bytes; the server only
    /// checks what the format itself needs.
    public static let minimumBytes = 12 + 16

    public init(bytes: [UInt8]) { self.bytes = bytes }

    /// Unpadded base64url of the bytes: the wire form.
    public var text: String { Base64URL.encode(bytes) }
    public var count: Int { bytes.count }
    public var description: String { "<sealed \(bytes.count) bytes>" }

    /// Why a text was refused.
    public enum Rejection: Error, Equatable, Sendable {
        case notBase64URL, tooShort, tooLarge
    }

    /// Reads the wire form: unpadded, canonical base64url of `minimumBytes...maxBytes` bytes.
    /// The length is checked before a byte is decoded, so an oversized value costs no allocation
    /// beyond the text the JSON reader already holds.
    public static func parse(_ text: String, maxBytes: Int) -> Result<SealedBytes, Rejection> {
        let length = text.utf8.count
        // n bytes take ceil(4n/3) characters unpadded.
        guard length <= (maxBytes * 4 + 2) / 3 else { return .failure(.tooLarge) }
        guard !text.utf8.contains(UInt8(ascii: "=")), let bytes = Base64URL.decode(text) else { return .failure(.notBase64URL) }
        guard bytes.count <= maxBytes else { return .failure(.tooLarge) }
        guard bytes.count >= minimumBytes else { return .failure(.tooShort) }
        return .success(SealedBytes(bytes: bytes))
    }
}

/// A sealed location as an event holds it: the key it was sealed under, the status it was sealed
/// for (the stream's status when it was applied) and the sealed bytes. The seq it was sealed for
/// is its event's. The status is kept because a watcher needs it to open the value and cannot
/// always work it out: older status events may be gone from the history, and the escalation's
/// `last` shows a point sealed before the escalation turned the stream red.
public struct SealedPoint: Equatable, Sendable {
    public var kid: E2EKeyID
    public var status: PanicStatus
    public var sealed: SealedBytes

    public init(kid: E2EKeyID, status: PanicStatus, sealed: SealedBytes) {
        self.kid = kid
        self.status = status
        self.sealed = sealed
    }
}

/// One circle member's copy of the stream key, wrapped on the owner's device under a key derived
/// from that member's secret. `member` is the circle's member number (`CheckinMember.id`).
public struct MemberBox: Equatable, Sendable {
    public var member: UInt32
    public var box: SealedBytes

    public init(member: UInt32, box: SealedBytes) {
        self.member = member
        self.box = box
    }
}

/// The keys' public side of an e2e stream: the current key id and the circle members' boxes,
/// one per member number, sorted by it. `panic.rekey` replaces both at once.
public struct E2EKeys: Equatable, Sendable {
    public private(set) var kid: E2EKeyID
    public private(set) var boxes: [MemberBox]

    /// `boxes` must name each member once (`E2EKeys.validated` checks it for input from the wire).
    public init(kid: E2EKeyID, boxes: [MemberBox]) {
        self.kid = kid
        self.boxes = boxes.sorted { $0.member < $1.member }
    }

    /// This member's box, and no other's: what a member watching with its member token is sent.
    public func box(forMember member: UInt32) -> SealedBytes? {
        boxes.first { $0.member == member }?.box
    }

    /// The total of the sealed bytes held (boxes): what `vigild state inspect` may show.
    public var boxBytes: Int { boxes.reduce(0) { $0 + $1.box.count } }
}

/// `panic.start`'s `e2e` object: the format version, the key id, the start's sealed location
/// (sealed for seq 1 and the start's status) and the circle members' boxes (none for a stream
/// with direct contacts only).
public struct E2EStart: Equatable, Sendable {
    /// The only format version there is.
    public static let version = 1

    public var keys: E2EKeys
    public var sealed: SealedBytes

    public init(keys: E2EKeys, sealed: SealedBytes) {
        self.keys = keys
        self.sealed = sealed
    }

    /// The start's point, sealed for seq 1 and the start's `status`.
    public func point(status: PanicStatus) -> SealedPoint { SealedPoint(kid: keys.kid, status: status, sealed: sealed) }
}

/// The rule that lets the owner's device seal the seq it expects: a sealed update names the seq
/// and status it was sealed for, and is applied only if they are the stream's next seq and its
/// current status. Otherwise the client learns both (`seq_mismatch` with `current_seq` and
/// `status`), seals again and resends. The server cannot check what is inside; this keeps the
/// associated data the watchers check equal to what the server records.
public enum SealedSeqCheck {
    /// Nil when the update may be applied; otherwise the failure to answer with.
    public static func check(seq: UInt64, status: PanicStatus, streamSeq: UInt64, streamStatus: PanicStatus) -> PanicFailure? {
        guard streamSeq < UInt64.max, seq == streamSeq + 1, status == streamStatus else {
            return .seqMismatch(currentSeq: streamSeq, status: streamStatus)
        }
        return nil
    }
}
