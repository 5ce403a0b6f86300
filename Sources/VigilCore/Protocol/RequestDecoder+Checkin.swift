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
        case "checkin.register":
            let circle = try circleID(o)
            let credential = try credential(o)
            switch (try o["push"].map(pushTarget), try o["relay"].map(relayTarget)) {
            case (let push?, nil): return .register(circle: circle, credential: credential, target: push)
            case (nil, let relay?): return .register(circle: circle, credential: credential, target: relay)
            default: throw RequestError("invalid_subscription", "give exactly one of push and relay")
            }
        case "checkin.unregister":
            let circle = try circleID(o)
            let credential = try credential(o)
            guard let v = o["subscription"] else { throw RequestError.missing("subscription") }
            guard let text = v.string else { throw RequestError("invalid_subscription", field: "subscription", "subscription must be a string") }
            return .unregister(circle: circle, credential: credential, subscription: SubscriptionID(text))
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

    /// Exactly one of `owner_token` and `member_token`.
    func credential(_ o: JSONObject) throws -> CheckinCredential {
        switch (try optionalToken(o, "owner_token"), try optionalToken(o, "member_token")) {
        case (let owner?, nil): return .owner(token: owner)
        case (nil, let member?): return .member(token: member)
        default: throw RequestError("invalid_token", "give exactly one of owner_token and member_token")
        }
    }

    /// `push`: a Push API subscription as `PushSubscription.toJSON()` gives it: `{"endpoint": URL,
    /// "keys": {"p256dh": B64URL, "auth": B64URL}}`, and `expirationTime` (null or a time, which
    /// browsers set to null and the server has no use for: read and not kept), so a page sends
    /// what the browser gave it, unedited. The endpoint's shape only (1 to 1024 bytes of visible ASCII); whether it is a URL the server
    /// may send to is the application's to judge. Errors never echo the values.
    func pushTarget(_ v: JSONValue) throws -> CheckinSubscription.Target {
        typealias Target = CheckinSubscription.Target
        guard let o = v.object else {
            throw RequestError("invalid_push", field: "push", "push must be an object {\"endpoint\": .., \"keys\": {\"p256dh\": .., \"auth\": ..}}")
        }
        for key in o.keys where key != "endpoint" && key != "keys" && key != "expirationTime" {
            throw RequestError.unknownField("push.\(key.prefix(64))")
        }
        if let expiration = o["expirationTime"], !expiration.isNull, expiration.double == nil {
            throw RequestError("invalid_push", field: "push.expirationTime", "push.expirationTime must be null or a time")
        }
        guard let e = o["endpoint"] else { throw RequestError.missing("push.endpoint") }
        guard let endpoint = e.string, Target.isVisibleASCII(endpoint, maxBytes: Target.maxEndpointBytes) else {
            throw RequestError("invalid_push", field: "push.endpoint",
                               "push.endpoint must be a URL of 1 to \(Target.maxEndpointBytes) bytes of visible ASCII")
        }
        guard let k = o["keys"] else { throw RequestError.missing("push.keys") }
        guard let keys = k.object else {
            throw RequestError("invalid_push", field: "push.keys", "push.keys must be an object {\"p256dh\": .., \"auth\": ..}")
        }
        for key in keys.keys where key != "p256dh" && key != "auth" { throw RequestError.unknownField("push.keys.\(key.prefix(64))") }
        guard let p = keys["p256dh"] else { throw RequestError.missing("push.keys.p256dh") }
        guard let p256dh = p.string.flatMap(Base64URL.decode), p256dh.count == Target.p256dhBytes, p256dh[0] == 0x04 else {
            throw RequestError("invalid_push", field: "push.keys.p256dh",
                               "push.keys.p256dh must be an uncompressed P-256 public key (65 bytes, the first 0x04) in base64url")
        }
        guard let a = keys["auth"] else { throw RequestError.missing("push.keys.auth") }
        guard let auth = a.string.flatMap(Base64URL.decode), auth.count == Target.authBytes else {
            throw RequestError("invalid_push", field: "push.keys.auth", "push.keys.auth must be 16 bytes in base64url")
        }
        return .webPush(endpoint: endpoint, p256dh: p256dh, auth: auth)
    }

    /// `relay`: `{"handle": H}`, 1 to 512 bytes of visible ASCII, opaque to the server.
    func relayTarget(_ v: JSONValue) throws -> CheckinSubscription.Target {
        typealias Target = CheckinSubscription.Target
        guard let o = v.object else { throw RequestError("invalid_relay", field: "relay", "relay must be an object {\"handle\": ..}") }
        for key in o.keys where key != "handle" { throw RequestError.unknownField("relay.\(key.prefix(64))") }
        guard let h = o["handle"] else { throw RequestError.missing("relay.handle") }
        guard let handle = h.string, Target.isVisibleASCII(handle, maxBytes: Target.maxHandleBytes) else {
            throw RequestError("invalid_relay", field: "relay.handle",
                               "relay.handle must be 1 to \(Target.maxHandleBytes) bytes of visible ASCII (no spaces)")
        }
        return .relay(handle: handle)
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
