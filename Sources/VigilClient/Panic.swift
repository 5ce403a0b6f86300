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
    /// Opens an e2e stream's sealed points (without a key: none opens).
    let opener: E2EOpener

    init(order: Int, stream: String, token: String, credentialKey: String, since: Int?, events: AsyncStream<WatchEvent>.Continuation,
         e2e: E2EWatchKey? = nil) {
        self.opener = E2EOpener(e2e ?? .fragment(""))
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
        let (opened, failed) = openState(reply)
        guard let s = opened, let state = try? s.decode(PanicState.self) else {
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
        for f in failed { events.yield(.cannotDecrypt(f)) }
        sayNotice()
        resolveWaiters(.success(()))
        return nil
    }

    func event(_ type: String, _ msg: JSONObject, client: isolated VigilClient) {
        guard active else { return }
        guard let seq = msg["seq"]?.intValue else {
            if type == "panic.stale" {
                if let e = try? JSONValue.object(msg).decode(PanicStale.self) { events.yield(.stale(e)) } else { bad(msg) }
            } else if type == "panic.rekeyed", let kid = msg["kid"]?.stringValue {
                // The stream's key changed: a member gets its new box with it.
                if opener.member != nil { opener.box(msg["box"]?.stringValue, kids: [kid]) }
                events.yield(.rekeyed(kid: kid))
                sayNotice()
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
        case "panic.location" where E2EOpener.isSealed(value):
            // Opened into a location, or said as not opened: never a position from one that did not open.
            if let (clear, _) = opener.opened(msg, seq: seq) {
                if let e = try? JSONValue.object(clear).decode(PanicLocation.self) { events.yield(.location(e)) } else { bad(msg) }
            } else {
                events.yield(.cannotDecrypt(CannotDecrypt(stream: stream, seq: seq, at: msg["at"]?.int64Value ?? 0,
                                                          kid: msg["kid"]?.stringValue ?? "")))
            }
            sayNotice()
        case "panic.location":
            if let e = try? value.decode(PanicLocation.self) { events.yield(.location(e)) } else { bad(msg) }
        case "panic.status":
            let status = openStatus(msg)
            if let e = try? JSONValue.object(status).decode(PanicStatusChange.self) { events.yield(.status(e)) } else { bad(msg) }
            sayNotice()
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

/// A watched panic stream (``VigilClient/watch(stream:watchToken:since:e2e:)``).
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
    /// An e2e stream's current key (nil: a clear stream), and the member secrets its boxes are made from.
    var e2eKey: StreamKey?
    var memberSecrets: [Int: [UInt8]] = [:]
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

    /// Sends a position (`panic.update`); returns the new seq. On an end-to-end encrypted
    /// stream it is sealed (``update(_:maxReseals:timeout:)``).
    @discardableResult
    public func update(_ position: Position, timeout: Duration? = nil) async throws(VigilError) -> Int {
        if await client.ownerKey(order) != nil {
            return try await update(E2EPosition(position), timeout: timeout)
        }
        return try await client.steer(order, "panic.update", position.fields, timeout: timeout)["seq"]?.intValue ?? 0
    }

    /// Sends a position (and note) sealed, on an end-to-end encrypted stream: for the seq the
    /// owner expects (its seq + 1) and its status. When the server answers `seq_mismatch` (an
    /// event it made, a status change meanwhile) it is sealed again for the server's
    /// `current_seq` + 1 and `status` and sent again, at most `maxReseals` times. Returns the seq.
    @discardableResult
    public func update(_ position: E2EPosition, maxReseals: Int = 5, timeout: Duration? = nil) async throws(VigilError) -> Int {
        try await client.sealedUpdate(order, position, maxReseals: maxReseals, timeout: timeout)
    }

    /// An end-to-end encrypted stream's current key (hand ``StreamKey/base64url`` to the direct
    /// contacts, in the watch link's fragment `k`); nil for a clear stream.
    public func e2eKey() async -> StreamKey? { await client.ownerKey(order) }

    /// Replaces an end-to-end encrypted stream's key (`panic.rekey`): a new key and kid, with a
    /// box for each of `memberSecrets` (member number → secret; default: those it holds). Leave a
    /// revoked member out: it keeps only what it could already read. Returns the new key.
    @discardableResult
    public func rekey(memberSecrets: [Int: [UInt8]]? = nil, timeout: Duration? = nil) async throws(VigilError) -> StreamKey {
        try await client.rekey(order, memberSecrets: memberSecrets, timeout: timeout)
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
    ///
    /// `e2e`: the key an end-to-end encrypted stream's points are opened with (its link's
    /// fragment, or the key). Each point that opens is a ``WatchEvent/location(_:)``, each that
    /// does not a ``WatchEvent/cannotDecrypt(_:)``; without a key none opens.
    public func watch(stream: String, watchToken: String, since: Int? = nil, e2e: E2EWatchKey? = nil) async throws(VigilError) -> VigilWatch {
        try await watch(stream, token: watchToken, key: "watch_token", since: since, e2e: e2e)
    }

    /// Watches a stream of a check-in circle with a member token. `e2e`: for an end-to-end
    /// encrypted stream, ``E2EWatchKey/member(secret:member:)`` opens the member's box.
    public func watch(stream: String, memberToken: String, since: Int? = nil, e2e: E2EWatchKey? = nil) async throws(VigilError) -> VigilWatch {
        try await watch(stream, token: memberToken, key: "member_token", since: since, e2e: e2e)
    }

    func watch(_ stream: String, token: String, key: String, since: Int?, e2e: E2EWatchKey? = nil) async throws(VigilError) -> VigilWatch {
        if state == .closed { throw closedError("panic.watch") }
        let (events, cont) = AsyncStream<WatchEvent>.makeStream()
        let rec = WatchRecord(order: nextID, stream: stream, token: token, credentialKey: key, since: since, events: cont, e2e: e2e)
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
        let replays = !rec.first
        if replays { fields["since"] = .number(Double(rec.lastSeq)) }
        let r = try start("panic.watch", fields, timeout: options.requestTimeout, onReply: { reply in
            guard rec.active else { return nil }
            if let error = rec.reply(reply) { return error }
            // A stream that had ended before it was first watched sends nothing more: its state
            // (with `ended`) is the watch's last event. (After `since`, the replay that follows
            // the reply brings `panic.ended`, which ends the watch.)
            if !replays, rec.state?.ended != nil {
                self.forgetWatch(rec)
                rec.finish()
            }
            return nil
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
    ///
    /// `e2e` (e.g. `StreamKey.generate()`): an end-to-end encrypted stream. The position and note
    /// are sealed for seq 1 and `status` and never sent in clear; `memberSecrets` (a circle's
    /// member numbers and their secrets) each get a box with the key.
    public func startPanic(status: PanicStatus, position: Position, note: String? = nil, watchers: Int? = nil,
                           dueIn: Duration? = nil, circle: (id: String, ownerToken: String)? = nil,
                           e2e: StreamKey? = nil, memberSecrets: [Int: [UInt8]] = [:],
                           timeout: Duration? = nil) async throws(VigilError) -> PanicOwner {
        var fields = position.fields
        fields["status"] = .string(status.rawValue)
        if let note { fields["note"] = .string(note) }
        if let e2e {
            fields = try E2EWire.startFields(fields, position: E2EPosition(position, note: note), key: e2e, status: status,
                                             memberSecrets: memberSecrets)
        }
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
                self.owners[stream]?.e2eKey = e2e
                self.owners[stream]?.memberSecrets = memberSecrets
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
    /// `e2e`: an end-to-end encrypted stream's key, kept by the app, so its updates go on sealed.
    public func resumePanic(stream: String, ownerToken: String, e2e: StreamKey? = nil,
                            memberSecrets: [Int: [UInt8]] = [:]) async throws(VigilError) -> PanicOwner {
        if state == .closed { throw closedError("panic.resume") }
        // Already owned with this token: resumed again, the same owner (and its events).
        if let rec = owners[stream], rec.ownerToken == ownerToken {
            if let e2e { rec.e2eKey = e2e; rec.memberSecrets = memberSecrets }
            try await resume(rec)
            return PanicOwner(client: self, stream: stream, ownerToken: ownerToken, order: rec.order, events: rec.eventStream)
        }
        let previous = owners[stream]
        let (events, cont) = AsyncStream<OwnerEvent>.makeStream()
        let rec = OwnerRecord(order: nextID, stream: stream, ownerToken: ownerToken, reply: [:], status: nil, events: cont, eventStream: events)
        rec.e2eKey = e2e
        rec.memberSecrets = memberSecrets
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

/// The e2e members of the owner's requests.
enum E2EWire {
    static func error(_ e: E2EError, _ op: String) -> VigilError {
        VigilError(code: e.code.rawValue, message: e.message, op: op)
    }

    /// The stream key boxed for each member, in member order: the wire's `boxes`.
    static func boxes(_ key: StreamKey, _ memberSecrets: [Int: [UInt8]], op: String) throws(VigilError) -> JSONValue {
        var out: [JSONValue] = []
        for (member, secret) in memberSecrets.sorted(by: { $0.key < $1.key }) {
            do {
                let box = try E2E.wrapForMember(key, memberSecret: secret, member: UInt64(max(0, member)))
                out.append(.object(["member": .number(Double(member)), "box": .string(box)]))
            } catch {
                throw Self.error(error, op)
            }
        }
        return .array(out)
    }

    /// A start's fields with the position and note sealed for seq 1: `e2e` (and `boxes`) in place of them.
    static func startFields(_ clear: JSONObject, position: E2EPosition, key: StreamKey, status: PanicStatus,
                            memberSecrets: [Int: [UInt8]]) throws(VigilError) -> JSONObject {
        var fields = clear
        for k in ["lat", "lon", "accuracy_m", "heading", "speed_mps", "note"] { fields[k] = nil }
        let sealed: String
        do { sealed = try E2E.seal(position, key: key, seq: 1, status: status) } catch { throw Self.error(error, "panic.start") }
        var e2e: JSONObject = ["v": .number(Double(E2E.version)), "kid": .string(key.kid), "sealed": .string(sealed)]
        // A circle's boxes go inside `e2e` (docs/PROTOCOL.md, "Operations").
        if !memberSecrets.isEmpty { e2e["boxes"] = try boxes(key, memberSecrets, op: "panic.start") }
        fields["e2e"] = .object(e2e)
        return fields
    }
}

extension VigilClient {
    func ownerKey(_ order: Int) -> StreamKey? { ownerRecord(order)?.e2eKey }

    func sealedUpdate(_ order: Int, _ position: E2EPosition, maxReseals: Int, timeout: Duration?) async throws(VigilError) -> Int {
        var reseals = 0
        while true {
            guard let rec = ownerRecord(order) else {
                throw VigilError(code: "not_owner", message: "panic.update: this client no longer owns the stream", op: "panic.update")
            }
            guard let key = rec.e2eKey, let status = rec.status else {
                throw VigilError(code: "not_e2e", message: "panic.update: no stream key (start it with e2e, or resume it with its key)", op: "panic.update")
            }
            let seq = rec.seq + 1
            let sealed: String
            do { sealed = try E2E.seal(position, key: key, seq: UInt64(seq), status: status) } catch { throw E2EWire.error(error, "panic.update") }
            let fields: JSONObject = ["sealed": .string(sealed), "kid": .string(key.kid), "seq": .number(Double(seq)), "status": .string(status.rawValue)]
            do {
                return try await steer(order, "panic.update", fields, timeout: timeout)["seq"]?.intValue ?? seq
            } catch {
                guard error.code == "seq_mismatch", let current = error.reply?["current_seq"]?.intValue else { throw error }
                // What the server has, kept even when this update gives up, so that the next one
                // is sealed for its seq + 1 and its status.
                if let rec = ownerRecord(order) {
                    rec.seq = current
                    if let s = error.reply?["status"]?.stringValue.flatMap(PanicStatus.init(rawValue:)) { rec.status = s }
                }
                guard reseals < maxReseals else { throw error }
                reseals += 1
            }
        }
    }

    func rekey(_ order: Int, memberSecrets: [Int: [UInt8]]?, timeout: Duration?) async throws(VigilError) -> StreamKey {
        guard let rec = ownerRecord(order), rec.e2eKey != nil else {
            throw VigilError(code: "not_e2e", message: "panic.rekey: not an end-to-end encrypted stream of this client", op: "panic.rekey")
        }
        let secrets = memberSecrets ?? rec.memberSecrets
        let next = StreamKey.generate()
        var fields: JSONObject = ["kid": .string(next.kid)]
        if rec.circle != nil || !secrets.isEmpty { fields["boxes"] = try E2EWire.boxes(next, secrets, op: "panic.rekey") }
        _ = try await steer(order, "panic.rekey", fields, timeout: timeout)
        if let rec = ownerRecord(order) {
            rec.e2eKey = next
            rec.memberSecrets = secrets
        }
        return next
    }
}
