/// The one rule for a message's top-level members (docs/PROTOCOL.md, "Envelope"): a member that
/// is neither the envelope's (`op`, `ref`) nor a field of the operation is refused with
/// `unknown_field` naming it, as a stray member inside `pin`, `changes`, `area` or `viewer` is.
///
/// Why refuse rather than ignore: a field the server drops silently is a field the client thinks
/// it sent (a `note` on `checkin.request` that no one will read, `due_in` for `due_in_s` on a
/// safety timer that is then never set). An error names the mistake at once.
extension RequestDecoder {
    /// The top-level fields each operation defines, besides `op` and `ref`; every name of
    /// `ClientOperation.names` has an entry (`RequestDecoderFieldsTests` checks it, and sends
    /// every operation with a stray field). A name missing here is answered `unknown_op`.
    ///
    /// Arrays of a few names, searched linearly: a message has a handful of members, and
    /// comparing short strings costs less than hashing them. Nothing is allocated per message.
    static let operationFields: [String: [String]] = [
        "subscribe": ["area", "categories", "viewer", "view"],
        "unsubscribe": [],
        "pin.create": ["pin"],
        "pin.update": ["id", "edit_token", "changes"],
        "pin.delete": ["id", "edit_token"],
        "pin.vote": ["id", "value"],
        "panic.start": ["status", "lat", "lon", "accuracy_m", "heading", "speed_mps", "note", "watchers", "due_in_s", "due_at",
                        "circle", "owner_token", "e2e"],
        "panic.update": ["stream", "owner_token", "lat", "lon", "accuracy_m", "heading", "speed_mps", "sealed", "kid", "seq", "status"],
        "panic.rekey": ["stream", "owner_token", "kid", "boxes"],
        "panic.status": ["stream", "owner_token", "status"],
        "panic.end": ["stream", "owner_token", "reason"],
        "panic.resume": ["stream", "owner_token"],
        "panic.watch": ["stream", "watch_token", "member_token", "since"],
        "panic.unwatch": ["stream"],
        "panic.invite": ["stream", "owner_token"],
        "panic.revoke": ["stream", "owner_token", "watch_token"],
        "panic.timer": ["stream", "owner_token", "due_in_s", "due_at", "cancel"],
        "checkin.create": ["members"],
        "checkin.open": ["circle", "owner_token"],
        "checkin.invite": ["circle", "owner_token", "label"],
        "checkin.revoke": ["circle", "owner_token", "member"],
        "checkin.answer": ["circle", "owner_token", "status", "note"],
        "checkin.home": ["circle", "owner_token", "for_s", "until", "clear"],
        "checkin.close": ["circle", "owner_token"],
        "checkin.join": ["circle", "member_token"],
        "checkin.request": ["circle", "member_token"],
        "checkin.leave": ["circle"],
        "checkin.register": ["circle", "owner_token", "member_token", "push", "relay"],
        "checkin.unregister": ["circle", "owner_token", "member_token", "subscription"],
        "checkin.ack": ["circle", "owner_token", "member_token", "notice"],
    ]

    /// Throws `unknown_field` for the first member of `o`, in document order, that is neither
    /// `op`, `ref` nor one of `fields`. Checked before any field's value, as the nested objects
    /// are: a misspelt field is named as such, not reported as the required one it replaced.
    /// The name in the error is cut to 64 characters (it is the client's text, echoed); a member
    /// named `""` is refused without a `field`, which is never empty.
    static func refuseUnknownFields(_ o: JSONObject, allowed fields: [String], idem: Bool = false) throws {
        for member in o.members {
            let key = member.key
            if key == "op" || key == "ref" || fields.contains(key) || (idem && key == "idem") { continue }
            if key.isEmpty { throw RequestError("unknown_field", "a member with an empty name is not a field of this operation") }
            throw RequestError.unknownField(String(key.prefix(64)))
        }
    }
}

/// `"idem"` (docs/PROTOCOL.md, "Writes that are safe to retry"): taken by every operation that
/// changes state, and by no read (there it is an `unknown_field`, as any member the operation does
/// not define).
extension RequestDecoder {
    /// The operations that take `idem`: exactly those whose `ClientOperation.changesState` is true
    /// (`RequestDecoderIdemTests` checks every operation against it).
    public static let idempotentOperations: Set<String> = [
        "pin.create", "pin.update", "pin.delete", "pin.vote",
        "panic.start", "panic.update", "panic.status", "panic.end", "panic.invite", "panic.revoke", "panic.timer", "panic.rekey",
        "checkin.create", "checkin.invite", "checkin.revoke", "checkin.answer", "checkin.home", "checkin.close",
        "checkin.request", "checkin.register", "checkin.unregister", "checkin.ack",
    ]

    /// The key and the canonical request when `idem` is present; `invalid_idem` when it is not a
    /// string of 16 to 64 characters of `[A-Za-z0-9_-]`.
    func idemClaim(_ o: JSONObject) throws -> IdempotencyClaim? {
        guard let v = o["idem"] else { return nil }
        guard let key = v.string, IdempotencyKey.isValid(key) else {
            throw RequestError("invalid_idem", field: "idem",
                               "idem must be a string of \(IdempotencyKey.minLength) to \(IdempotencyKey.maxLength) characters of A-Z, a-z, 0-9, _ and -")
        }
        return IdempotencyClaim(key: key, canonical: IdempotencyKey.canonicalRequest(o))
    }
}
