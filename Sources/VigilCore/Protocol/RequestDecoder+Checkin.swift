/// Decoding of the `checkin.*` operations (docs/PROTOCOL.md, "Check-in circles").
extension RequestDecoder {
    /// The operation, or nil when `op` is not a check-in operation.
    func decodeCheckin(_ op: String, _ o: JSONObject) throws -> CheckinOperation? {
        switch op {
        case "checkin.create":
            var labels: [String?] = []
            if let m = o["members"] {
                guard let items = m.array, items.count <= checkin.maxMembers else {
                    throw RequestError("invalid_members", field: "members",
                                       "members must be a list of at most \(checkin.maxMembers) labels (strings, or null for none)")
                }
                labels = try items.map { $0.isNull ? nil : try memberLabel($0, field: "members") }
            }
            return .create(labels: labels)
        case "checkin.open":
            return .open(circle: try circleID(o), ownerToken: try requiredToken(o, "owner_token"))
        case "checkin.invite":
            let label = try o["label"].flatMap { $0.isNull ? nil : try memberLabel($0, field: "label") }
            return .invite(circle: try circleID(o), ownerToken: try requiredToken(o, "owner_token"), label: label)
        case "checkin.revoke":
            guard let m = o["member"] else { throw RequestError.missing("member") }
            guard let n = m.int64, n >= 1, n <= Int64(UInt32.max) else {
                throw RequestError("invalid_member", field: "member", "member must be a member number (a positive integer)")
            }
            return .revoke(circle: try circleID(o), ownerToken: try requiredToken(o, "owner_token"), member: UInt32(n))
        case "checkin.answer":
            if let s = o["status"], s.string != "safe" {
                throw RequestError("invalid_status", field: "status", "status must be \"safe\"")
            }
            let note = try optionalNote(o, characters: checkin.noteMaxCharacters, bytes: checkin.noteMaxBytes)
            return .answer(circle: try circleID(o), ownerToken: try requiredToken(o, "owner_token"), note: note)
        case "checkin.home":
            return .home(circle: try circleID(o), ownerToken: try requiredToken(o, "owner_token"), change: try homeChange(o))
        case "checkin.close":
            return .close(circle: try circleID(o), ownerToken: try requiredToken(o, "owner_token"))
        case "checkin.join":
            return .join(circle: try circleID(o), memberToken: try requiredToken(o, "member_token"))
        case "checkin.request":
            return .request(circle: try circleID(o), memberToken: try requiredToken(o, "member_token"))
        case "checkin.leave":
            return .leave(circle: try circleID(o))
        default:
            return nil
        }
    }

    /// Exactly one of `for_s` (whole seconds, 1 to `maxHomeMs`), `until` (unix ms; whether it is
    /// in the future and not too far is the hub's to judge, with its clock) and `"clear":true`.
    func homeChange(_ o: JSONObject) throws -> CheckinHomeChange {
        let tooMany = "give exactly one of for_s, until and clear"
        let given = try deadline(o, seconds: "for_s", at: "until", flag: "clear", maxSeconds: checkin.maxHomeMs / 1000,
                                 code: "invalid_home", tooMany: tooMany)
        switch given {
        case .inSeconds(let n): return .forSeconds(n)
        case .at(let t): return .until(t)
        case .flag: return .clear
        case nil: throw RequestError("invalid_home", tooMany)
        }
    }

    /// A member's label: 1 to `labelMaxCharacters` characters (and `labelMaxBytes` bytes) after
    /// trimming white space.
    func memberLabel(_ v: JSONValue, field: String) throws -> String {
        try nonEmptyText(v, field: field, code: "invalid_label", characters: checkin.labelMaxCharacters, bytes: checkin.labelMaxBytes,
                         what: "a label")
    }

    func circleID(_ o: JSONObject) throws -> CircleID? {
        guard let v = o["circle"] else { throw RequestError.missing("circle") }
        guard let text = v.string else { throw RequestError("invalid_circle", field: "circle", "circle must be a string") }
        return CircleID(text)
    }

    func requiredToken(_ o: JSONObject, _ name: String) throws -> String {
        guard let token = try optionalToken(o, name) else { throw RequestError.missing(name) }
        return token
    }
}
