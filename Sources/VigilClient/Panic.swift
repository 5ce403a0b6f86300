import Foundation

/// One watched stream: delivers each event with a seq exactly once and in order, re-watching
/// after a reconnect or a hole with `since` = the last seq delivered, or says ``WatchEvent/gap(_:lastSeq:)``.
final class WatchRecord {
    let order: Int
    var lastRequest: RequestRecord?
    let stream: String
    let token: String
    /// `watch_token`, or `member_token` for a member of the stream's circle.
    let credentialKey: String
    var lastSeq: Int
    var first: Bool
    var syncing = false
    var state: PanicState?
    var active = true
    let events: AsyncStream<WatchEvent>.Continuation
    var syncWaiters: [CheckedContinuation<Result<Void, VigilError>, Never>] = []

    init(order: Int, stream: String, token: String, credentialKey: String, since: Int?, events: AsyncStream<WatchEvent>.Continuation) {
        self.order = order
        self.stream = stream
        self.token = token
        self.credentialKey = credentialKey
        self.lastSeq = since ?? 0
        self.first = since == nil
        self.events = events
    }

    func resolveWaiters(_ r: Result<Void, VigilError>) {
        let w = syncWaiters
        syncWaiters = []
        for c in w { c.resume(returning: r) }
    }

    func finish() {
        active = false
        resolveWaiters(.failure(VigilError(code: VigilError.Code.closed, message: "the watch ended", op: "panic.watch")))
        events.finish()
    }

    func reply(_ reply: JSONObject) -> VigilError? {
        syncing = false
        guard let s = reply["state"], let state = try? s.decode(PanicState.self) else {
            return VigilError(code: VigilError.Code.badMessage, message: "a watch reply's state could not be read")
        }
        self.state = state
        let gap = reply["gap"]?.boolValue ?? false
        if first || gap {
            let previous = lastSeq
            lastSeq = state.seq
            first = false
            if gap { events.yield(.gap(state, lastSeq: previous)) }
        }
        events.yield(.state(state, gap: gap))
        resolveWaiters(.success(()))
        return nil
    }

    func event(_ type: String, _ msg: JSONObject, client: isolated VigilClient) {
        guard active else { return }
        guard let seq = msg["seq"]?.intValue else {
            if type == "panic.stale" {
                if let e = try? JSONValue.object(msg).decode(PanicStale.self) { events.yield(.stale(e)) } else { bad(msg) }
            } else if type == "panic.revoked" {
                client.forgetWatch(self)
                events.yield(.revoked)
                finish()
            }
            return
        }
        if syncing || seq <= lastSeq { return }  // replayed after the pending reply, or a duplicate
        if seq > lastSeq + 1 {
            // A hole (a conflated backlog): ask for what is missing, from the last seq delivered.
            client.syncInBackground(self)
            return
        }
        lastSeq = seq
        let value = JSONValue.object(msg)
        switch type {
        case "panic.location":
            if let e = try? value.decode(PanicLocation.self) { events.yield(.location(e)) } else { bad(msg) }
        case "panic.status":
            if let e = try? value.decode(PanicStatusChange.self) { events.yield(.status(e)) } else { bad(msg) }
        case "panic.timer":
            if let e = try? value.decode(PanicTimerChange.self) { events.yield(.timer(e)) } else { bad(msg) }
        case "panic.ended":
            // An ended stream sends nothing more: it is not watched again after a reconnect.
            client.forgetWatch(self)
            if let e = try? value.decode(PanicEnded.self) { events.yield(.ended(e)) } else { bad(msg) }
            finish()
        default:
            break
        }
    }

    func bad(_ msg: JSONObject) {
        events.yield(.error(VigilError(code: VigilError.Code.badMessage, message: "\(msg["type"]?.stringValue ?? "an event") could not be read", reply: msg)))
    }
}

/// A watched panic stream (``VigilClient/watch(stream:watchToken:since:)``).
public struct VigilWatch: Sendable {
    /// The client.
    public let client: VigilClient
    /// The stream id.
    public let stream: String
    let order: Int
    /// The events, each once and in order: one consumer. It finishes when the stream ended,
    /// the token was revoked, the watch was stopped or the client closed.
    public let events: AsyncStream<WatchEvent>

    /// The seq of the last event delivered (0 before any).
    public func lastSeq() async -> Int { await client.watchInfo(order).lastSeq }
    /// The state of the last (re-)watch reply.
    public func state() async -> PanicState? { await client.watchInfo(order).state }
    /// Whether the watch goes on.
    public func isActive() async -> Bool { await client.watchInfo(order).active }
    /// Stops watching.
    public func unwatch() async throws(VigilError) { try await client.unwatch(order, stream: stream) }
}

/// A stream this client owns (``VigilClient/startPanic(status:position:note:watchers:dueIn:circle:)``).
final class OwnerRecord {
    let order: Int
    var lastRequest: RequestRecord?
    let stream: String
    let ownerToken: String
    var watchTokens: [String]
    var circle: String?
    var seq: Int
    var watchers = 0
    var ended = false
    var status: PanicStatus?
    var dueAt: Int64?
    var escalated: Escalation?
    let events: AsyncStream<OwnerEvent>.Continuation
    let eventStream: AsyncStream<OwnerEvent>

    init(order: Int, stream: String, ownerToken: String, reply: JSONObject, status: PanicStatus?,
         events: AsyncStream<OwnerEvent>.Continuation, eventStream: AsyncStream<OwnerEvent>) {
        self.eventStream = eventStream
        self.order = order
        self.stream = stream
        self.ownerToken = ownerToken
        self.watchTokens = reply["watch_tokens"]?.arrayValue?.compactMap(\.stringValue) ?? []
        self.circle = reply["circle"]?.stringValue
        self.seq = reply["seq"]?.intValue ?? 0
        self.status = status
        self.dueAt = reply["due_at"]?.int64Value
        self.events = events
    }

    func event(_ msg: JSONObject) {
        if msg["reason"]?.stringValue == "missed_check_in" {
            guard let e = try? JSONValue.object(msg).decode(PanicStatusChange.self) else { return }
            status = .red
            dueAt = nil
            escalated = Escalation(reason: "missed_check_in", at: e.at, sentAt: e.sentAt ?? e.at)
            if e.seq > seq { seq = e.seq }
            events.yield(.missedCheckIn(e))
            return
        }
        if msg["type"]?.stringValue == "panic.watchers", let n = msg["count"]?.intValue {
            watchers = n
            events.yield(.watchers(n))
        }
    }

    func resumed(_ state: PanicState) {
        seq = state.seq
        status = state.status
        dueAt = state.timer?.dueAt
        escalated = state.escalated
        if state.ended != nil { ended = true }
        if let c = state.circle { circle = c }
        events.yield(.resumed(state))
    }
}

/// What the owner of a stream knows of it.
public struct OwnerSnapshot: Sendable, Equatable {
    /// The seq of the last event the owner caused or heard of.
    public var seq: Int
    /// `red` or `amber`: as started, as set, or as the server had it on resume.
    public var status: PanicStatus?
    /// The safety timer's deadline (ms).
    public var dueAt: Int64?
    /// The missed check-in's alarm, once raised.
    public var escalated: Escalation?
    /// The live watch tokens this client minted or was given.
    public var watchTokens: [String]
    /// How many connections watch.
    public var watchers: Int
    /// Whether the owner ended the stream (or the resume found it ended).
    public var ended: Bool
    /// The circle the stream was started for.
    public var circle: String?
}

/// A stream this client owns: send positions and status, the safety timer, end it, invite and
/// revoke contacts. It is resumed with its owner token after each reconnect.
public struct PanicOwner: Sendable {
    /// The client.
    public let client: VigilClient
    /// The stream id.
    public let stream: String
    /// The owner token (keep it to resume after a restart of the app).
    public let ownerToken: String
    let order: Int
    /// What the owner hears (watchers, the missed check-in, resumes): one consumer.
    public let events: AsyncStream<OwnerEvent>

    /// What the owner knows of the stream.
    public func snapshot() async -> OwnerSnapshot? { await client.ownerSnapshot(order) }
    /// The live watch tokens this client minted or was given (for the SOS links).
    public func watchTokens() async -> [String] { await client.ownerSnapshot(order)?.watchTokens ?? [] }

    /// Sends a position (`panic.update`); returns the new seq.
    @discardableResult
    public func update(_ position: Position, timeout: Duration? = nil) async throws(VigilError) -> Int {
        try await client.steer(order, "panic.update", position.fields, timeout: timeout)["seq"]?.intValue ?? 0
    }

    /// Sets the status; returns the seq.
    @discardableResult
    public func setStatus(_ status: PanicStatus, timeout: Duration? = nil) async throws(VigilError) -> Int {
        let reply = try await client.steer(order, "panic.status", ["status": .string(status.rawValue)], timeout: timeout)
        await client.ownerSet(order) { $0.status = status }
        return reply["seq"]?.intValue ?? 0
    }

    /// Sets or moves the safety timer to `dueIn` from now (whole seconds); returns the deadline the server keeps (ms).
    @discardableResult
    public func setTimer(dueIn: Duration, timeout: Duration? = nil) async throws(VigilError) -> Int64? {
        try await setTimer(["due_in_s": .number(Double(dueIn.components.seconds))], timeout)
    }

    /// Sets or moves the safety timer to `dueAt` (Unix ms); returns the deadline the server keeps.
    @discardableResult
    public func setTimer(dueAt: Int64, timeout: Duration? = nil) async throws(VigilError) -> Int64? {
        try await setTimer(["due_at": .number(Double(dueAt))], timeout)
    }

    func setTimer(_ fields: JSONObject, _ timeout: Duration?) async throws(VigilError) -> Int64? {
        let reply = try await client.steer(order, "panic.timer", fields, timeout: timeout)
        let due = reply["due_at"]?.int64Value
        await client.ownerSet(order) { $0.dueAt = due }
        return due
    }

    /// Cancels the safety timer.
    public func cancelTimer(timeout: Duration? = nil) async throws(VigilError) {
        _ = try await client.steer(order, "panic.timer", ["cancel": true], timeout: timeout)
        await client.ownerSet(order) { $0.dueAt = nil }
    }

    /// Ends the stream (`safe` or `cancelled`); returns the last seq.
    @discardableResult
    public func end(_ reason: String = "safe", timeout: Duration? = nil) async throws(VigilError) -> Int {
        let reply = try await client.steer(order, "panic.end", ["reason": .string(reason)], timeout: timeout)
        await client.endOwner(order)
        return reply["seq"]?.intValue ?? 0
    }

    /// Mints one more watch token.
    public func invite(timeout: Duration? = nil) async throws(VigilError) -> String {
        let reply = try await client.steer(order, "panic.invite", [:], timeout: timeout)
        guard let token = reply["watch_token"]?.stringValue else {
            throw VigilError(code: VigilError.Code.badMessage, message: "panic.invite: no watch_token", op: "panic.invite")
        }
        await client.ownerSet(order) { $0.watchTokens.append(token) }
        return token
    }

    /// Revokes a watch token: its watchers get `panic.revoked`.
    public func revoke(_ watchToken: String, timeout: Duration? = nil) async throws(VigilError) {
        _ = try await client.steer(order, "panic.revoke", ["watch_token": .string(watchToken)], timeout: timeout)
        await client.ownerSet(order) { $0.watchTokens.removeAll { $0 == watchToken } }
    }

    /// Follows `positions` (a location feed): sends them as `panic.update`, at most one every
    /// `minInterval`, the newest position winning, never one while the previous is unanswered.
    public func follow<S: AsyncSequence & Sendable>(_ positions: S, minInterval: Duration = .seconds(1)) -> PositionFollower
    where S.Element == Position {
        PositionFollower(owner: self, positions: positions, minInterval: minInterval, clock: client.options.clock)
    }
}

extension VigilClient {
    /// Watches a stream with a watch token. Returns once the first reply arrived (or, if the
    /// connection went before it, once the reply after the reconnect did). `since`: the last
    /// seq the app has (the events after it are replayed); `nil`: from the current state.
    public func watch(stream: String, watchToken: String, since: Int? = nil) async throws(VigilError) -> VigilWatch {
        try await watch(stream, token: watchToken, key: "watch_token", since: since)
    }

    /// Watches a stream of a check-in circle with a member token.
    public func watch(stream: String, memberToken: String, since: Int? = nil) async throws(VigilError) -> VigilWatch {
        try await watch(stream, token: memberToken, key: "member_token", since: since)
    }

    func watch(_ stream: String, token: String, key: String, since: Int?) async throws(VigilError) -> VigilWatch {
        if state == .closed { throw closedError("panic.watch") }
        let (events, cont) = AsyncStream<WatchEvent>.makeStream()
        let rec = WatchRecord(order: nextID, stream: stream, token: token, credentialKey: key, since: since, events: cont)
        nextID += 1
        watches[stream]?.finish()
        watches[stream] = rec
        let handle = VigilWatch(client: self, stream: stream, order: rec.order, events: events)
        do {
            try await sync(rec)
        } catch {
            if error.code == VigilError.Code.disconnected, state != .closed, rec.active {
                // Sent again after the reconnect: wait for that reply.
                let r = await withCheckedContinuation { (c: CheckedContinuation<Result<Void, VigilError>, Never>) in
                    rec.syncWaiters.append(c)
                }
                do throws(VigilError) {
                    try r.get()
                    return handle
                } catch {
                    forgetWatch(rec)
                    rec.finish()
                    throw error
                }
            }
            forgetWatch(rec)
            rec.finish()
            throw error
        }
        return handle
    }

    func sync(_ rec: WatchRecord) async throws(VigilError) {
        _ = try await result(of: startSync(rec))
    }

    func startSync(_ rec: WatchRecord) throws(VigilError) -> RequestRecord {
        rec.syncing = true
        var fields: JSONObject = ["stream": .string(rec.stream), rec.credentialKey: .string(rec.token)]
        if !rec.first { fields["since"] = .number(Double(rec.lastSeq)) }
        let r = try start("panic.watch", fields, timeout: options.requestTimeout, onReply: { reply in
            guard rec.active else { return nil }
            return rec.reply(reply)
        })
        rec.lastRequest = r
        return r
    }

    func syncInBackground(_ rec: WatchRecord) {
        guard rec.active, watches[rec.stream] === rec else { return }
        background({ () throws(VigilError) -> RequestRecord in try self.startSync(rec) }) { error in
            guard let error, VigilClient.reportable(error) else { return }
            rec.events.yield(.error(error))
            if error.code == "forbidden" {
                self.forgetWatch(rec)
                rec.finish()
            }
        }
    }

    func forgetWatch(_ rec: WatchRecord) {
        if watches[rec.stream] === rec { watches[rec.stream] = nil }
        endedWatches[rec.order] = rec
        // The last state of ended watches, for their handles: the newest 64.
        if endedWatches.count > 64, let oldest = endedWatches.keys.min() { endedWatches[oldest] = nil }
    }

    func watchInfo(_ order: Int) -> (lastSeq: Int, state: PanicState?, active: Bool) {
        if let r = watches.values.first(where: { $0.order == order }) { return (r.lastSeq, r.state, r.active) }
        if let r = endedWatches[order] { return (r.lastSeq, r.state, false) }
        return (0, nil, false)
    }

    func unwatch(_ order: Int, stream: String) async throws(VigilError) {
        if let rec = watches[stream], rec.order == order {
            watches[stream] = nil
            rec.finish()
        }
        if state == .open { _ = try await request("panic.unwatch", ["stream": .string(stream)]) }
    }

    // MARK: owning a stream

    /// Starts a panic stream and returns its owner (keep ``PanicOwner/ownerToken`` to resume
    /// after a restart of the app). `dueIn`: a safety timer (whole seconds). `circle`: the
    /// check-in circle and its owner token, whose members then hear of the stream.
    public func startPanic(status: PanicStatus, position: Position, note: String? = nil, watchers: Int? = nil,
                           dueIn: Duration? = nil, circle: (id: String, ownerToken: String)? = nil,
                           timeout: Duration? = nil) async throws(VigilError) -> PanicOwner {
        var fields = position.fields
        fields["status"] = .string(status.rawValue)
        if let note { fields["note"] = .string(note) }
        if let watchers { fields["watchers"] = .number(Double(watchers)) }
        if let dueIn { fields["due_in_s"] = .number(Double(dueIn.components.seconds)) }
        if let circle {
            fields["circle"] = .string(circle.id)
            fields["owner_token"] = .string(circle.ownerToken)
        }
        let idem = options.sendsIdempotencyKeys ? makeIdempotencyKey() : nil
        let t = timeout ?? options.requestTimeout
        let reply = try await withRateLimit("panic.start") { () async throws(VigilError) -> JSONObject in
            try await self.call("panic.start", fields, timeout: t, isWrite: true, idem: idem, onReply: { reply in
                guard let stream = reply["stream"]?.stringValue, let token = reply["owner_token"]?.stringValue else {
                    return VigilError(code: VigilError.Code.badMessage, message: "panic.start: no stream or owner_token")
                }
                // Adopted before any later message is handled: the `panic.watchers` right behind the reply reaches it.
                _ = self.adopt(stream, token, reply: reply, status: status)
                return nil
            })
        }
        guard let stream = reply["stream"]?.stringValue, let rec = owners[stream] else {
            throw VigilError(code: VigilError.Code.badMessage, message: "panic.start: no owner", op: "panic.start")
        }
        return PanicOwner(client: self, stream: stream, ownerToken: rec.ownerToken, order: rec.order, events: rec.eventStream)
    }

    func adopt(_ stream: String, _ token: String, reply: JSONObject, status: PanicStatus?) -> PanicOwner {
        let (events, cont) = AsyncStream<OwnerEvent>.makeStream()
        let rec = OwnerRecord(order: nextID, stream: stream, ownerToken: token, reply: reply, status: status, events: cont, eventStream: events)
        nextID += 1
        owners[stream]?.events.finish()
        owners[stream] = rec
        return PanicOwner(client: self, stream: stream, ownerToken: token, order: rec.order, events: events)
    }

    /// Becomes the owner of a stream again (after the app restarted), with its owner token.
    public func resumePanic(stream: String, ownerToken: String) async throws(VigilError) -> PanicOwner {
        if state == .closed { throw closedError("panic.resume") }
        // Already owned with this token: resumed again, the same owner (and its events).
        if let rec = owners[stream], rec.ownerToken == ownerToken {
            try await resume(rec)
            return PanicOwner(client: self, stream: stream, ownerToken: ownerToken, order: rec.order, events: rec.eventStream)
        }
        let previous = owners[stream]
        let (events, cont) = AsyncStream<OwnerEvent>.makeStream()
        let rec = OwnerRecord(order: nextID, stream: stream, ownerToken: ownerToken, reply: [:], status: nil, events: cont, eventStream: events)
        nextID += 1
        owners[stream] = rec
        do {
            try await resume(rec)
        } catch {
            // A wrong token changes nothing: the stream stays its previous owner's.
            if owners[stream] === rec { owners[stream] = previous }
            rec.events.finish()
            throw error
        }
        if let previous, previous !== rec { previous.events.finish() }
        return PanicOwner(client: self, stream: stream, ownerToken: ownerToken, order: rec.order, events: events)
    }

    func resume(_ rec: OwnerRecord) async throws(VigilError) {
        _ = try await result(of: startResume(rec))
    }

    func startResume(_ rec: OwnerRecord) throws(VigilError) -> RequestRecord {
        let r = try start("panic.resume", ["stream": .string(rec.stream), "owner_token": .string(rec.ownerToken)],
                          timeout: options.requestTimeout, onReply: { reply in
            guard let s = reply["state"], let state = try? s.decode(PanicState.self) else {
                return VigilError(code: VigilError.Code.badMessage, message: "panic.resume: the state could not be read")
            }
            rec.resumed(state)
            return nil
        })
        rec.lastRequest = r
        return r
    }

    func resumeInBackground(_ rec: OwnerRecord) {
        guard owners[rec.stream] === rec else { return }
        background({ () throws(VigilError) -> RequestRecord in try self.startResume(rec) }) { error in
            if let error, VigilClient.reportable(error) { rec.events.yield(.error(error)) }
        }
    }

    func ownerRecord(_ order: Int) -> OwnerRecord? { owners.values.first { $0.order == order } }

    func ownerSnapshot(_ order: Int) -> OwnerSnapshot? {
        guard let r = ownerRecord(order) else { return nil }
        return OwnerSnapshot(seq: r.seq, status: r.status, dueAt: r.dueAt, escalated: r.escalated, watchTokens: r.watchTokens,
                             watchers: r.watchers, ended: r.ended, circle: r.circle)
    }

    func ownerSet(_ order: Int, _ change: (OwnerRecord) -> Void) {
        if let r = ownerRecord(order) { change(r) }
    }

    func endOwner(_ order: Int) {
        guard let r = ownerRecord(order) else { return }
        r.ended = true
        owners[r.stream] = nil
        r.events.finish()
    }

    /// An owner's request: the owner token goes with every one, so a request sent before the
    /// resume after a reconnect is still the owner's.
    func steer(_ order: Int, _ op: String, _ fields: JSONObject, timeout: Duration?) async throws(VigilError) -> JSONObject {
        guard let rec = ownerRecord(order) else {
            throw VigilError(code: "not_owner", message: "\(op): this client no longer owns the stream", op: op)
        }
        var f = fields
        f["stream"] = .string(rec.stream)
        f["owner_token"] = .string(rec.ownerToken)
        let reply = try await request(op, f, timeout: timeout)
        if let seq = reply["seq"]?.intValue, seq > rec.seq { rec.seq = seq }
        return reply
    }
}
