/// Decoding of the `panic.*` operations (docs/PROTOCOL.md, "Panic-location streams").
extension RequestDecoder {
    /// The operation, or nil when `op` is not a panic operation.
    func decodePanic(_ op: String, _ o: JSONObject) throws -> ClientOperation? {
        switch op {
        case "panic.start":
            let status = try panicStatus(o)
            let e2e = try e2eStart(o, forCircle: o["circle"] != nil)
            let location = e2e == nil ? try panicLocation(o) : nil
            let note = try optionalNote(o, characters: panic.noteMaxCharacters, bytes: panic.noteMaxBytes)
            var watchers = 1
            if let w = o["watchers"] {
                guard let n = w.int64, n >= 1, n <= Int64(panic.maxWatchersOnStart) else {
                    throw RequestError("invalid_watchers", field: "watchers", "watchers must be an integer from 1 to \(panic.maxWatchersOnStart)")
                }
                watchers = Int(n)
            }
            let timer = try panicTimer(o, cancellable: false)
            let circle = try startCircle(o)
            if let e2e { return .panicStartE2E(status: status, e2e: e2e, watchers: watchers, timer: timer, circle: circle) }
            guard let location else { throw RequestError.missing("lat") }   // read above whenever there is no e2e
            return .panicStart(status: status, location: location, note: note, watchers: watchers, timer: timer, circle: circle)
        case "panic.timer":
            let stream = try streamID(o)
            guard let timer = try panicTimer(o, cancellable: true) else { throw RequestError.missing("due_in_s") }
            return .panicTimer(stream: stream, ownerToken: try optionalToken(o, "owner_token"), timer: timer)
        case "panic.update":
            let stream = try streamID(o)
            let token = try optionalToken(o, "owner_token")
            if let sealed = try sealedUpdate(o) { return .panicUpdateSealed(stream: stream, ownerToken: token, update: sealed) }
            return .panicUpdate(stream: stream, ownerToken: token, location: try panicLocation(o))
        case "panic.rekey":
            let stream = try streamID(o)
            return .panicRekey(stream: stream, ownerToken: try optionalToken(o, "owner_token"), keys: try rekeyKeys(o))
        case "panic.status":
            return .panicStatus(stream: try streamID(o), ownerToken: try optionalToken(o, "owner_token"), status: try panicStatus(o))
        case "panic.end":
            guard let r = o["reason"] else { throw RequestError.missing("reason") }
            guard let text = r.string, let reason = PanicEndReason(rawValue: text), reason.isGivenByOwner else {
                throw RequestError("invalid_reason", field: "reason", "reason must be \"safe\" or \"cancelled\"")
            }
            return .panicEnd(stream: try streamID(o), ownerToken: try optionalToken(o, "owner_token"), reason: reason)
        case "panic.resume":
            let stream = try streamID(o)
            guard let token = try optionalToken(o, "owner_token") else { throw RequestError.missing("owner_token") }
            return .panicResume(stream: stream, ownerToken: token)
        case "panic.watch":
            let stream = try streamID(o)
            let watchToken = try optionalToken(o, "watch_token")
            let memberToken = try optionalToken(o, "member_token")
            var since: UInt64?
            if let s = o["since"] {
                guard let n = s.int64, n >= 0 else { throw RequestError("invalid_since", field: "since", "since must be a non-negative integer seq") }
                since = UInt64(n)
            }
            switch (watchToken, memberToken) {
            case (let token?, nil): return .panicWatch(stream: stream, watchToken: token, since: since)
            case (nil, let token?): return .panicWatchAsMember(stream: stream, memberToken: token, since: since)
            case (_?, _?):
                throw RequestError("invalid_token", field: "member_token", "give watch_token or member_token, not both")
            case (nil, nil):
                throw RequestError("missing_field", field: "watch_token", "watch_token (or a circle's member_token) is required")
            }
        case "panic.unwatch":
            return .panicUnwatch(stream: try streamID(o))
        case "panic.invite":
            return .panicInvite(stream: try streamID(o), ownerToken: try optionalToken(o, "owner_token"))
        case "panic.revoke":
            let stream = try streamID(o)
            guard let token = try optionalToken(o, "watch_token") else { throw RequestError.missing("watch_token") }
            return .panicRevoke(stream: stream, ownerToken: try optionalToken(o, "owner_token"), watchToken: token)
        default:
            return nil
        }
    }

    /// The safety timer of `panic.start` or `panic.timer`: at most one of `due_in_s` (whole
    /// seconds, 1 to `maxTimerMs`), `due_at` (unix ms; whether it is in the future and not too far
    /// is the hub's to judge, with its clock) and, where `cancellable`, `"cancel":true`. Nil when none.
    func panicTimer(_ o: JSONObject, cancellable: Bool) throws -> PanicTimer? {
        let given = try deadline(o, seconds: "due_in_s", at: "due_at", flag: cancellable ? "cancel" : nil,
                                 maxSeconds: panic.maxTimerMs / 1000, code: "invalid_timer",
                                 tooMany: "give one of due_in_s, due_at\(cancellable ? " and cancel" : "")")
        switch given {
        case .inSeconds(let n): return .inSeconds(n)
        case .at(let t): return .at(t)
        case .flag: return .cancel
        case nil: return nil
        }
    }

    /// `panic.start`'s circle: `circle` and its `owner_token` come together (the owner of a
    /// circle starts a stream for it), or neither does. Either alone is `missing_field` naming
    /// the other: a stream meant for a circle must not start as one for nobody.
    func startCircle(_ o: JSONObject) throws -> CircleToken? {
        let token = try optionalToken(o, "owner_token")
        guard o["circle"] != nil else {
            guard token == nil else { throw RequestError("missing_field", field: "circle", "owner_token needs the circle it opens") }
            return nil
        }
        let circle = try circleID(o)
        guard let token else { throw RequestError("missing_field", field: "owner_token", "circle needs the circle's owner_token") }
        return CircleToken(circle: circle, token: token)
    }

    func streamID(_ o: JSONObject) throws -> StreamID? {
        guard let v = o["stream"] else { throw RequestError.missing("stream") }
        guard let text = v.string else { throw RequestError("invalid_stream", field: "stream", "stream must be a string") }
        return StreamID(text)
    }

    func optionalToken(_ o: JSONObject, _ name: String) throws -> String? {
        guard let v = o[name] else { return nil }
        guard let text = v.string else { throw RequestError("invalid_token", field: name, "\(name) must be a string") }
        return text
    }

    func panicStatus(_ o: JSONObject) throws -> PanicStatus {
        guard let v = o["status"] else { throw RequestError.missing("status") }
        guard let text = v.string, let status = PanicStatus(rawValue: text) else {
            throw RequestError("invalid_status", field: "status", "status must be \"red\" or \"amber\"")
        }
        return status
    }

    func panicLocation(_ o: JSONObject) throws -> PanicLocation {
        guard let lat = o["lat"] else { throw RequestError.missing("lat") }
        guard let lon = o["lon"] else { throw RequestError.missing("lon") }
        func optional(_ name: String, _ code: String, _ range: ClosedRange<Double>, _ what: String) throws -> Double? {
            guard let v = o[name], !v.isNull else { return nil }
            guard let d = v.double, d.isFinite, range.contains(d) else { throw RequestError(code, field: name, "\(name) must be \(what)") }
            return d
        }
        return PanicLocation(
            lat: try latitude(lat, field: "lat"),
            lon: try longitude(lon, field: "lon"),
            accuracyM: try optional("accuracy_m", "invalid_accuracy", 0...100_000, "a number of metres from 0 to 100000"),
            heading: try optional("heading", "invalid_heading", 0...360, "a number of degrees from 0 to 360"),
            speedMps: try optional("speed_mps", "invalid_speed", 0...1_000, "a number of metres per second from 0 to 1000"))
    }
}
