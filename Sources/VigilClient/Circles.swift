import Foundation

/// A check-in circle this client listens to: its state as the last open/join reply had it,
/// kept by the circle's news. Opened (or joined) again after each reconnect.
final class CircleRecord {
    let order: Int
    var lastRequest: RequestRecord?
    let id: String
    let credential: CircleCredential
    var state: CircleState?
    var active = true
    let events: AsyncStream<CircleEvent>.Continuation

    init(order: Int, id: String, credential: CircleCredential, events: AsyncStream<CircleEvent>.Continuation) {
        self.order = order
        self.id = id
        self.credential = credential
        self.events = events
    }

    var isOwner: Bool { if case .owner = credential { true } else { false } }

    var fields: JSONObject {
        var f = credential.fields
        f["circle"] = .string(id)
        return f
    }

    func reply(_ reply: JSONObject) -> VigilError? {
        guard let s = reply["state"], let state = try? s.decode(CircleState.self) else {
            return VigilError(code: VigilError.Code.badMessage, message: "a circle's state could not be read")
        }
        let missed = self.state.map { CircleMissed(old: $0, new: state) }
        self.state = state
        events.yield(.state(state, missed: missed))
        return nil
    }

    func finish() {
        active = false
        events.finish()
    }

    func event(_ type: String, _ msg: JSONObject, client: isolated VigilClient) {
        guard active else { return }
        let value = JSONValue.object(msg)
        func bad() {
            events.yield(.error(VigilError(code: VigilError.Code.badMessage, message: "\(type) could not be read", reply: msg)))
        }
        switch type {
        case "checkin.requested":
            guard let r = try? value.decode(CheckinRequest.self) else { return bad() }
            state?.requests.removeAll { $0.member == r.member }
            state?.requests.append(r)
            events.yield(.requested(r))
        case "checkin.answered":
            guard let a = try? msg["answer"]?.decode(CheckinAnswer.self) else { return bad() }
            state?.answer = a
            state?.requests = []
            events.yield(.answered(a))
        case "checkin.home":
            guard let h = try? value.decode(HomeChange.self) else { return bad() }
            if h.state == "set", let until = h.until { state?.home = HomeSafe(at: h.at ?? 0, until: until) } else { state?.home = nil }
            events.yield(.home(h))
        case "checkin.panic":
            guard let n = try? value.decode(CirclePanicNews.self) else { return bad() }
            if var s = state {
                let had = s.panics.first { $0.stream == n.stream }
                s.panics.removeAll { $0.stream == n.stream }
                if n.event != "ended" {
                    var p = had ?? CirclePanic(stream: n.stream, status: n.status ?? .red, startedAt: n.at, escalatedAt: nil)
                    if let st = n.status { p.status = st }
                    if n.event == "escalated" { p.escalatedAt = n.at }
                    s.panics.append(p)
                }
                state = s
            }
            events.yield(.panic(n))
        case "checkin.acked":
            guard let a = try? value.decode(NoticeAck.self) else { return bad() }
            if state != nil { state!.acks = (state!.acks ?? []) + [a] }
            events.yield(.acked(a))
        case "checkin.revoked":
            client.forgetCircle(self)
            events.yield(.revoked(member: msg["member"]?.intValue))
            finish()
        case "checkin.closed":
            client.forgetCircle(self)
            let c = (try? value.decode(CircleClosed.self)) ?? CircleClosed(reason: msg["reason"]?.stringValue ?? "closed", at: nil)
            events.yield(.closed(c))
            finish()
        default:
            break
        }
    }
}

/// A check-in circle listened to (as its owner or a member): its ``events`` and the
/// operations of the role its credential gives.
public struct VigilCircle: Sendable {
    /// The client.
    public let client: VigilClient
    /// The circle id.
    public let id: String
    /// The owner token or the member token it was opened with.
    public let credential: CircleCredential
    let order: Int
    /// The state (each open/join reply) and the news: one consumer. It finishes when the
    /// member is revoked, the circle closed, left, or the client closed.
    public let events: AsyncStream<CircleEvent>

    /// Whether this is the owner's view.
    public var isOwner: Bool { if case .owner = credential { true } else { false } }

    /// The state as the last reply had it, kept by the news.
    public func state() async -> CircleState? { await client.circleInfo(order).state }
    /// Whether the circle is still listened to.
    public func isActive() async -> Bool { await client.circleInfo(order).active }

    func call(_ op: String, _ extra: JSONObject = [:], timeout: Duration? = nil) async throws(VigilError) -> JSONObject {
        var f = credential.fields
        f["circle"] = .string(id)
        for (k, v) in extra { f[k] = v }
        return try await client.request(op, f, timeout: timeout)
    }

    // MARK: the owner's

    /// Mints a member token (shown this once).
    public func invite(label: String? = nil) async throws(VigilError) -> MemberInvite {
        let reply = try await call("checkin.invite", label.map { ["label": .string($0)] } ?? [:])
        guard let m = reply["member"]?.intValue, let t = reply["member_token"]?.stringValue else {
            throw VigilError(code: VigilError.Code.badMessage, message: "checkin.invite: no member", op: "checkin.invite")
        }
        let invite = MemberInvite(member: m, label: reply["label"]?.stringValue, token: t)
        await client.circleSet(order) { $0.state?.members?.append(CircleMember(member: m, label: invite.label, addedAt: nil)) }
        return invite
    }

    /// Withdraws a member's invitation.
    public func revoke(member: Int) async throws(VigilError) {
        _ = try await call("checkin.revoke", ["member": .number(Double(member))])
        await client.circleSet(order) { $0.state?.members?.removeAll { $0.member == member } }
    }

    /// "I am safe": answers every pending request.
    public func answer(note: String? = nil) async throws(VigilError) -> CheckinAnswer {
        var f: JSONObject = ["status": "safe"]
        if let note { f["note"] = .string(note) }
        let reply = try await call("checkin.answer", f)
        return try VigilClient.read(CheckinAnswer.self, reply["answer"] ?? .null, "checkin.answer")
    }

    /// Home safe for `duration` (whole seconds).
    public func home(for duration: Duration) async throws(VigilError) -> HomeSafe? {
        try await home(["for_s": .number(Double(duration.components.seconds))])
    }

    /// Home safe until `until` (Unix ms).
    public func home(until: Int64) async throws(VigilError) -> HomeSafe? {
        try await home(["until": .number(Double(until))])
    }

    /// Clears home safe.
    public func clearHome() async throws(VigilError) {
        _ = try await home(["clear": true])
    }

    func home(_ f: JSONObject) async throws(VigilError) -> HomeSafe? {
        let reply = try await call("checkin.home", f)
        guard let h = reply["home"], !h.isNull else { return nil }
        return try VigilClient.read(HomeSafe.self, h, "checkin.home")
    }

    /// Closes the circle for everyone (its tokens are deleted).
    public func close() async throws(VigilError) {
        _ = try await call("checkin.close")
        await client.endCircle(order)
    }

    /// Starts a panic stream for this circle (owner only): its members hear `checkin.panic`.
    public func startPanic(status: PanicStatus, position: Position, note: String? = nil, watchers: Int? = nil,
                           dueIn: Duration? = nil) async throws(VigilError) -> PanicOwner {
        guard case .owner(let token) = credential else {
            throw VigilError(code: "forbidden", message: "only the owner starts a circle's panic", op: "panic.start")
        }
        return try await client.startPanic(status: status, position: position, note: note, watchers: watchers, dueIn: dueIn, circle: (id, token))
    }

    // MARK: the members'

    /// "Are you safe?"; returns the request's time (ms).
    public func request() async throws(VigilError) -> Int64 {
        let reply = try await call("checkin.request")
        return reply["at"]?.int64Value ?? 0
    }

    /// Watches one of the circle's panic streams with the member token.
    public func watch(stream: String, since: Int? = nil) async throws(VigilError) -> VigilWatch {
        guard case .member(let token) = credential else {
            throw VigilError(code: "forbidden", message: "watching with a member token needs one", op: "panic.watch")
        }
        return try await client.watch(stream: stream, memberToken: token, since: since)
    }

    // MARK: both

    /// Stops listening (the circle and the credential stay valid).
    public func leave() async throws(VigilError) {
        await client.endCircle(order)
        if await client.isOpen { _ = try await client.request("checkin.leave", ["circle": .string(id)]) }
    }

    /// Registers the operator's webhook relay (`handle`: a native app's push token, opaque to
    /// the server) for the circle's notices; returns the subscription's id.
    public func registerRelay(handle: String) async throws(VigilError) -> String {
        try await client.registerRelay(circle: id, credential: credential, handle: handle)
    }

    /// Registers a Web Push subscription; returns its id.
    public func registerPush(endpoint: String, p256dh: String, auth: String) async throws(VigilError) -> String {
        try await client.registerPush(circle: id, credential: credential, endpoint: endpoint, p256dh: p256dh, auth: auth)
    }

    /// Removes a subscription.
    public func unregister(_ subscription: String) async throws(VigilError) {
        try await client.unregister(circle: id, credential: credential, subscription: subscription)
    }

    /// "I have seen it": acknowledges a notice.
    public func ack(notice: String) async throws(VigilError) {
        try await client.ack(circle: id, credential: credential, notice: notice)
    }
}

/// A circle just created: listened to as its owner, with the tokens shown this once.
public struct CreatedCircle: Sendable {
    /// The circle, listened to as its owner.
    public let circle: VigilCircle
    /// The owner token (keep it).
    public let ownerToken: String
    /// One token per member asked for, in order (the invite links are made of them).
    public let memberTokens: [MemberInvite]
    /// When the circle is removed if nothing keeps it alive (ms).
    public let expiresAt: Int64?
}

extension VigilClient {
    /// Creates a circle (`members`: a label or `nil` per member token to mint) and listens to
    /// it as its owner.
    public func createCircle(members: [String?] = []) async throws(VigilError) -> CreatedCircle {
        let reply = try await request("checkin.create", ["members": .array(members.map { $0.map(JSONValue.string) ?? .null })])
        guard let id = reply["circle"]?.stringValue, let owner = reply["owner_token"]?.stringValue else {
            throw VigilError(code: VigilError.Code.badMessage, message: "checkin.create: no circle", op: "checkin.create")
        }
        let tokens = (reply["members"]?.arrayValue ?? []).compactMap { m -> MemberInvite? in
            guard let n = m["member"]?.intValue, let t = m["member_token"]?.stringValue else { return nil }
            return MemberInvite(member: n, label: m["label"]?.stringValue, token: t)
        }
        let circle = try await listen(id, .owner(owner))
        return CreatedCircle(circle: circle, ownerToken: owner, memberTokens: tokens,
                             expiresAt: reply["expires_at"]?.int64Value)
    }

    /// Listens to a circle as its owner (`checkin.open`).
    public func openCircle(_ id: String, ownerToken: String) async throws(VigilError) -> VigilCircle {
        try await listen(id, .owner(ownerToken))
    }

    /// Listens to a circle as a member (`checkin.join`).
    public func joinCircle(_ id: String, memberToken: String) async throws(VigilError) -> VigilCircle {
        try await listen(id, .member(memberToken))
    }

    func listen(_ id: String, _ credential: CircleCredential) async throws(VigilError) -> VigilCircle {
        if state == .closed { throw closedError("checkin.open") }
        let (events, cont) = AsyncStream<CircleEvent>.makeStream()
        let rec = CircleRecord(order: nextID, id: id, credential: credential, events: cont)
        nextID += 1
        let previous = circles[id]
        circles[id] = rec
        do {
            try await listenCall(rec)
        } catch {
            if circles[id] === rec { circles[id] = previous }
            rec.finish()
            throw error
        }
        if let previous, previous !== rec { previous.finish() }
        return VigilCircle(client: self, id: id, credential: credential, order: rec.order, events: events)
    }

    func listenCall(_ rec: CircleRecord) async throws(VigilError) {
        _ = try await result(of: startListen(rec))
    }

    func startListen(_ rec: CircleRecord) throws(VigilError) -> RequestRecord {
        let r = try start(rec.isOwner ? "checkin.open" : "checkin.join", rec.fields, timeout: options.requestTimeout, onReply: { reply in
            guard rec.active else { return nil }
            return rec.reply(reply)
        })
        rec.lastRequest = r
        return r
    }

    func relisten(_ rec: CircleRecord) {
        guard circles[rec.id] === rec else { return }
        background({ () throws(VigilError) -> RequestRecord in try self.startListen(rec) }) { error in
            guard let error, VigilClient.reportable(error) else { return }
            rec.events.yield(.error(error))
            // Withdrawn or closed while the connection was away: nothing to listen to any more.
            if error.code == "forbidden" {
                self.forgetCircle(rec)
                rec.finish()
            }
        }
    }

    func forgetCircle(_ rec: CircleRecord) {
        if circles[rec.id] === rec { circles[rec.id] = nil }
        endedCircles[rec.order] = rec
        // The last state of circles no longer listened to, for their handles: the newest 64.
        if endedCircles.count > 64, let oldest = endedCircles.keys.min() { endedCircles[oldest] = nil }
    }

    func circleRecord(_ order: Int) -> CircleRecord? { circles.values.first { $0.order == order } }

    func circleInfo(_ order: Int) -> (state: CircleState?, active: Bool) {
        if let r = circleRecord(order) { return (r.state, r.active) }
        if let r = endedCircles[order] { return (r.state, false) }
        return (nil, false)
    }

    func circleSet(_ order: Int, _ change: (CircleRecord) -> Void) {
        if let r = circleRecord(order) { change(r) }
    }

    func endCircle(_ order: Int) {
        guard let r = circleRecord(order) else { return }
        forgetCircle(r)
        r.finish()
    }

    /// Registers the operator's webhook relay for a circle's notices (`handle`: what the relay
    /// maps to an APNs or FCM token); returns the subscription's id (for ``unregister(circle:credential:subscription:)``).
    public func registerRelay(circle: String, credential: CircleCredential, handle: String) async throws(VigilError) -> String {
        var f = credential.fields
        f["circle"] = .string(circle)
        f["relay"] = ["handle": .string(handle)]
        return try await subscriptionID(request("checkin.register", f))
    }

    /// Registers a Web Push subscription for a circle's notices; returns its id.
    public func registerPush(circle: String, credential: CircleCredential, endpoint: String, p256dh: String, auth: String) async throws(VigilError) -> String {
        var f = credential.fields
        f["circle"] = .string(circle)
        f["push"] = ["endpoint": .string(endpoint), "keys": ["p256dh": .string(p256dh), "auth": .string(auth)]]
        return try await subscriptionID(request("checkin.register", f))
    }

    func subscriptionID(_ reply: JSONObject) throws(VigilError) -> String {
        guard let id = reply["subscription"]?.stringValue else {
            throw VigilError(code: VigilError.Code.badMessage, message: "checkin.register: no subscription", op: "checkin.register")
        }
        return id
    }

    /// Removes a subscription that ``registerRelay(circle:credential:handle:)`` or ``registerPush(circle:credential:endpoint:p256dh:auth:)`` made.
    public func unregister(circle: String, credential: CircleCredential, subscription: String) async throws(VigilError) {
        var f = credential.fields
        f["circle"] = .string(circle)
        f["subscription"] = .string(subscription)
        _ = try await request("checkin.unregister", f)
    }

    /// "I have seen it": acknowledges notice `notice` (its id, from the push payload); the
    /// circle hears `checkin.acked`, the holder's other devices stop being told, the escalation stops.
    public func ack(circle: String, credential: CircleCredential, notice: String) async throws(VigilError) {
        var f = credential.fields
        f["circle"] = .string(circle)
        f["notice"] = .string(notice)
        _ = try await request("checkin.ack", f)
    }
}
