import Testing
@testable import VigilCore
import VigilTestSupport

/// End-to-end encrypted streams in the hub (docs/PROTOCOL.md, "End-to-end encrypted streams"):
/// sealed points only, the seq/status rule judged after the token, the keys replaced by the owner,
/// a member's own box, and the same timers as a clear stream.
@Suite struct PanicHubE2ETests {
    static let kid = E2EKeyID(bytes: Array(0...15))
    static let newKid = E2EKeyID(bytes: Array(16...31))
    static let circle = CircleID(high: 7, low: 9)

    static func sealed(_ fill: UInt8, count: Int = 92) -> SealedBytes { SealedBytes(bytes: [UInt8](repeating: fill, count: count)) }
    static func box(_ fill: UInt8) -> SealedBytes { sealed(fill, count: 60) }

    /// An e2e stream started at `now` by connection 1, its first point sealed with bytes of 1s.
    static func start(_ rig: inout PanicRig, status: PanicStatus = .red, boxes: [MemberBox] = [], circle: CircleID? = nil,
                      timer: PanicTimer? = nil, now: Int64 = 0) -> (id: StreamID, owner: String, watch: [String]) {
        let e2e = E2EStart(keys: E2EKeys(kid: kid, boxes: boxes), sealed: sealed(1))
        let r = try! rig.hub.start(owner: 1, status: status, origin: .e2e(e2e), watchers: 2, timer: timer, circle: circle,
                                   secrets: rig.secrets, now: now, out: &rig.out).get()
        return (r.stream.id, r.ownerToken, r.watchTokens)
    }

    static func update(_ rig: inout PanicRig, _ id: StreamID, by c: WatcherID = 1, token: String? = nil, seq: UInt64,
                       status: PanicStatus = .red, fill: UInt8 = 2, now: Int64 = 0) -> Result<UInt64, PanicFailure> {
        let point = SealedPoint(kid: kid, status: status, sealed: sealed(fill))
        return rig.hub.updateSealed(id, by: c, ownerToken: token, update: SealedUpdate(point: point, seq: seq), secrets: rig.secrets,
                                    now: now, out: &rig.out)
    }

    static func json(_ write: (inout JSONWriter) -> Void) -> String {
        var w = JSONWriter(capacity: 512)
        write(&w)
        return String(decoding: w.bytes, as: UTF8.self)
    }

    @Test func anE2EStreamHoldsSealedPointsAndNoCoordinates() throws {
        var rig = PanicRig()
        let (id, _, _) = Self.start(&rig)
        let s = try #require(rig.hub.stream(id))
        let first = SealedPoint(kid: Self.kid, status: .red, sealed: Self.sealed(1))
        #expect(s.isE2E && s.e2e?.kid == Self.kid && s.note == nil)
        #expect(s.last.position == .sealed(first, seq: 1) && s.last.clearLocation == nil)
        #expect(s.history.all.map(\.kind) == [.sealedLocation(first)] && s.trail.count == 1)
        let state = Self.json { ServerMessages.panicState(s, into: &$0) }
        #expect(state.contains(#""e2e":true,"kid":"\#(Self.kid.text)""#))
        #expect(state.contains(#""trail":[{"seq":1,"sealed":"\#(Self.sealed(1).text)","kid":"\#(Self.kid.text)","status":"red","at":0}]"#))
        #expect(state.contains(#""position_known":false"#))
        for clear in ["\"lat\"", "\"lon\"", "\"note\"", "\"box\""] { #expect(!state.contains(clear), "\(clear) in \(state)") }
    }

    @Test func aSealedUpdateNeedsTheNextSeqAndTheCurrentStatus() throws {
        var rig = PanicRig()
        let (id, _, watch) = Self.start(&rig)
        #expect(rig.watch(id, 7, watch[0]).ok)
        _ = rig.take()
        #expect(Self.update(&rig, id, seq: 3).failure == .seqMismatch(currentSeq: 1, status: .red))
        #expect(Self.update(&rig, id, seq: 1).failure == .seqMismatch(currentSeq: 1, status: .red))
        #expect(Self.update(&rig, id, seq: 2, status: .amber).failure == .seqMismatch(currentSeq: 1, status: .red))
        #expect(rig.take().isEmpty && rig.hub.stream(id)?.seq == 1)
        #expect(try Self.update(&rig, id, seq: 2, fill: 9, now: 5).get() == 2)
        let point = SealedPoint(kid: Self.kid, status: .red, sealed: Self.sealed(9))
        let sent = rig.take()
        #expect(sent.count == 1 && sent[0].recipients == [7] && sent[0].kind == .event(PanicEvent(seq: 2, at: 5, kind: .sealedLocation(point))))
        #expect(Self.json { ServerMessages.panicDelivery(sent[0], now: 5, into: &$0) }
                == #"{"type":"panic.location","stream":"\#(id)","seq":2,"sealed":"\#(Self.sealed(9).text)","kid":"\#(Self.kid.text)","status":"red","at":5}"#)
        // A status change takes a seq too: the next sealed update names both.
        #expect(rig.status(id, .amber).ok)
        #expect(Self.update(&rig, id, seq: 4, status: .red).failure == .seqMismatch(currentSeq: 3, status: .amber))
        #expect(Self.update(&rig, id, seq: 4, status: .amber).ok)
        #expect(rig.hub.stream(id)?.last.position == .sealed(SealedPoint(kid: Self.kid, status: .amber, sealed: Self.sealed(2)), seq: 4))
    }

    @Test func aStrangerLearnsNothingAndTheKindsDoNotMix() throws {
        var rig = PanicRig()
        let (id, owner, _) = Self.start(&rig)
        let clear = rig.start()
        // Another connection without the token: forbidden, whatever the seq (no current seq leaks).
        #expect(Self.update(&rig, id, by: 9, seq: 5).failure == .forbidden)
        #expect(Self.update(&rig, id, by: 9, token: "wrong", seq: 2).failure == .forbidden)
        #expect(rig.update(id, by: 9).failure == .forbidden)
        #expect(rig.hub.rekey(id, by: 9, ownerToken: nil, keys: E2EKeys(kid: Self.newKid, boxes: []), secrets: rig.secrets,
                              out: &rig.out).failure == .forbidden)
        #expect(Self.update(&rig, clear.id, by: 9, seq: 2).failure == .forbidden)
        // With the right to steer: each kind takes its own updates only.
        #expect(rig.update(id).failure == .sealedRequired)
        #expect(Self.update(&rig, clear.id, seq: 2).failure == .notE2E)
        #expect(rig.hub.rekey(clear.id, by: 1, ownerToken: nil, keys: E2EKeys(kid: Self.newKid, boxes: []), secrets: rig.secrets,
                              out: &rig.out).failure == .notE2E)
        #expect(Self.update(&rig, id, by: 9, token: owner, seq: 2).ok)
        #expect(rig.hub.stream(id)?.seq == 2 && rig.hub.stream(clear.id)?.seq == 1)
        #expect(rig.end(id).ok)
        #expect(Self.update(&rig, id, seq: 4).failure == .ended)
    }

    @Test func aMemberGetsItsOwnBoxAndARekeyTellsEachWatcherItsOwn() throws {
        var rig = PanicRig()
        let boxes = [MemberBox(member: 1, box: Self.box(11)), MemberBox(member: 2, box: Self.box(12))]
        let (id, owner, watch) = Self.start(&rig, boxes: boxes, circle: Self.circle)
        let d1 = rig.secrets.digest(ofToken: "member-1"), d2 = rig.secrets.digest(ofToken: "member-2")
        let w1 = try rig.hub.watch(id, watcher: 21, asMember: d1, number: 1, of: Self.circle, since: nil, out: &rig.out).get()
        let w2 = try rig.hub.watch(id, watcher: 22, asMember: d2, number: 2, of: Self.circle, since: nil, out: &rig.out).get()
        let w3 = try rig.hub.watch(id, watcher: 23, asMember: rig.secrets.digest(ofToken: "member-3"), number: 3, of: Self.circle,
                                   since: nil, out: &rig.out).get()
        let direct = try rig.watch(id, 7, watch[0]).get()
        #expect(w1.box == Self.box(11) && w2.box == Self.box(12) && w3.box == nil && direct.box == nil)
        let reply = Self.json { ServerMessages.reply(.panicState(w1.stream, gap: false, box: w1.box), ref: nil, into: &$0) }
        #expect(reply.contains(#""box":"\#(Self.box(11).text)""#) && !reply.contains(Self.box(12).text))
        _ = rig.take()
        // Member 2 revoked: the owner's device gives it no box under the new key.
        let keys = E2EKeys(kid: Self.newKid, boxes: [MemberBox(member: 1, box: Self.box(31))])
        #expect(rig.hub.rekey(id, by: 5, ownerToken: owner, keys: keys, secrets: rig.secrets, out: &rig.out) == .success(1))
        let told = rig.take().map { ($0.recipients, $0.kind) }
        #expect(told.count == 4)
        for (recipients, kind) in told {
            let expected: PanicDelivery.Kind = recipients == [21] ? .rekeyed(kid: Self.newKid, box: Self.box(31)) : .rekeyed(kid: Self.newKid, box: nil)
            #expect(kind == expected, "\(recipients)")
        }
        #expect(rig.hub.stream(id)?.e2e == keys && rig.hub.stream(id)?.seq == 1)
        let again = try rig.hub.watch(id, watcher: 22, asMember: d2, number: 2, of: Self.circle, since: nil, out: &rig.out).get()
        #expect(again.box == nil)
        #expect(rig.end(id).ok)
        #expect(rig.hub.rekey(id, by: 1, ownerToken: nil, keys: keys, secrets: rig.secrets, out: &rig.out).failure == .ended)
    }

    /// A rekey or a sealed update the journal could not record is taken back whole: the keys and
    /// the last sealed point are what they were.
    @Test func aChangeTakenBackRestoresTheKeysAndTheLastPoint() throws {
        var rig = PanicRig()
        let (id, _, _) = Self.start(&rig)
        let before = try #require(rig.hub.checkpoint(id, keepingWatchers: true))
        let held = try #require(rig.hub.stream(id))
        #expect(rig.hub.rekey(id, by: 1, ownerToken: nil, keys: E2EKeys(kid: Self.newKid, boxes: []), secrets: rig.secrets, out: &rig.out).ok)
        rig.hub.revert(to: before, connected: { _ in true })
        #expect(rig.hub.stream(id)?.e2e == held.e2e)
        let beforeUpdate = try #require(rig.hub.checkpoint(id))
        #expect(Self.update(&rig, id, seq: 2).ok)
        rig.hub.revert(to: beforeUpdate, connected: { _ in true })
        #expect(rig.hub.stream(id)?.hasTheSameState(as: held) == true && rig.hub.stream(id)?.last == held.last)
        #expect(Self.update(&rig, id, seq: 2).ok)
    }

    @Test func theEscalationCarriesTheLastSealedPointAndSaysThePositionIsUnknown() throws {
        var rig = PanicRig()
        let (id, _, watch) = Self.start(&rig, status: .amber, timer: .at(600_000))
        #expect(rig.watch(id, 7, watch[0]).ok)
        #expect(Self.update(&rig, id, seq: 2, status: .amber, fill: 5, now: 1_000).ok)
        _ = rig.take()
        rig.tick(600_000)
        let escalation = try #require(PanicHubSafetyTimerTests.escalations(rig.take()).first?.0)
        let point = SealedPoint(kid: Self.kid, status: .amber, sealed: Self.sealed(5))
        guard case .missedCheckIn(_, let last, _) = escalation.kind else { Issue.record("not an escalation"); return }
        #expect(last == LastLocation(position: .sealed(point, seq: 2), at: 1_000) && escalation.seq == 3)
        let text = Self.json { ServerMessages.panicEvent(id, escalation, into: &$0) }
        #expect(text.contains(#""last":{"sealed":"\#(Self.sealed(5).text)","kid":"\#(Self.kid.text)","status":"amber","seq":2,"at":1000},"position_known":false"#))
        #expect(!text.contains("\"lat\"") && rig.hub.stream(id)?.status == .red)
        // The owner seals the next update for the escalation's seq and the red it set.
        #expect(Self.update(&rig, id, seq: 4, status: .red).ok)
    }

    @Test func staleReplayConflationAndRemovalAreAsForAClearStream() throws {
        var rig = PanicRig(PanicSettings(staleAfterMs: 1_000, endedGraceMs: 5_000))
        let (id, _, watch) = Self.start(&rig)
        #expect(rig.watch(id, 7, watch[0]).ok)
        _ = rig.take()
        rig.tick(1_000)
        #expect(rig.take().map(\.kind) == [.stale(since: 0)])
        #expect(Self.update(&rig, id, seq: 2, now: 1_500).ok)
        #expect(Self.update(&rig, id, seq: 3, now: 1_600).ok)
        #expect(PanicEventKind.sealedLocation(SealedPoint(kid: Self.kid, status: .red, sealed: Self.sealed(1))).isLocation)
        let replay = try rig.watch(id, 8, watch[1], since: 1).get()
        #expect(replay.replay == 2...3 && rig.hub.stream(id)?.event(seq: 2)?.kind.isLocation == true)
        #expect(rig.end(id, now: 2_000).ok)
        rig.tick(6_999)
        #expect(rig.hub.stream(id) != nil)
        rig.tick(7_000)
        #expect(rig.hub.stream(id) == nil)
    }

    @Test func restoredStreamsKeepTheirKindAndRefuseTheOther() throws {
        var rig = PanicRig()
        let (id, _, _) = Self.start(&rig)
        #expect(Self.update(&rig, id, seq: 2).ok)
        let s = try #require(rig.hub.stream(id))
        func restore(last: LastLocation? = nil, e2e: E2EKeys?? = nil, note: String? = nil, history: [PanicEvent]? = nil) throws(PanicRestoreError) -> PanicStream {
            try PanicStream.restored(id: s.id, status: s.status, startedAt: s.startedAt, updatedAt: s.updatedAt, seq: s.seq,
                                     last: last ?? s.last, note: note, ended: nil, history: history ?? s.history.all,
                                     historyCapacity: 10, ownerDigest: s.ownerTokenDigest, watchTokens: s.watchTokenDigests,
                                     staleNotified: false, e2e: e2e ?? s.e2e)
        }
        let again = try restore()
        #expect(again.hasTheSameState(as: s) && again.e2e == s.e2e)
        #expect(throws: PanicRestoreError.invalidLocation) { try restore(e2e: .some(nil)) }                // sealed, but no keys
        #expect(throws: PanicRestoreError.invalidLocation) { try restore(last: LastLocation(location: PanicRig.at(1), at: 0)) }
        #expect(throws: PanicRestoreError.e2eMismatch) { try restore(note: "by the bridge") }
        let clearEvent = PanicEvent(seq: 2, at: 0, kind: .location(PanicRig.at(1)))
        #expect(throws: PanicRestoreError.e2eMismatch) { try restore(history: [s.history.all[0], clearEvent]) }
        var replayed = again
        if case .refused = replayed.replay(PanicEvent(seq: 3, at: 1, kind: .location(PanicRig.at(1)))) {} else { Issue.record("a clear location replayed into an e2e stream") }
        #expect(replayed.replayRekey(E2EKeys(kid: Self.newKid, boxes: [])) && !replayed.replayRekey(E2EKeys(kid: Self.newKid, boxes: [])))
        #expect(replayed.e2e?.kid == Self.newKid)
    }

    // MARK: the wire

    let decoder = RequestDecoder(settings: PinSettings(), panic: PanicSettings(sealedMaxBytes: 120))

    func decode(_ text: String) -> Result<ClientRequest, RejectedRequest> {
        Array(text.utf8).withUnsafeBytes { decoder.decode($0) }
    }

    func code(_ text: String) -> String? {
        if case .failure(let rejected) = decode(text) { return rejected.error.code }
        return nil
    }

    @Test func theWireTakesE2EStartsSealedUpdatesAndRekeys() throws {
        let kid = Self.kid.text, s = Self.sealed(3).text, b = Self.box(4).text
        let start = try decode(#"{"op":"panic.start","status":"red","watchers":2,"e2e":{"v":1,"kid":"\#(kid)","sealed":"\#(s)"}}"#).get()
        #expect(start.operation == .panicStartE2E(status: .red, e2e: E2EStart(keys: E2EKeys(kid: Self.kid, boxes: []), sealed: Self.sealed(3)),
                                                  watchers: 2, timer: nil))
        let update = try decode(#"{"op":"panic.update","stream":"AAECAwQFBgcICQoLDA0ODw","sealed":"\#(s)","kid":"\#(kid)","seq":2,"status":"amber","idem":"abcdefghijklmnop"}"#).get()
        guard case .panicUpdateSealed(_, nil, let sealed) = update.operation else { Issue.record("\(update.operation)"); return }
        #expect(sealed == SealedUpdate(point: SealedPoint(kid: Self.kid, status: .amber, sealed: Self.sealed(3)), seq: 2))
        let rekey = try decode(#"{"op":"panic.rekey","stream":"AAECAwQFBgcICQoLDA0ODw","owner_token":"t","kid":"\#(kid)","boxes":[{"member":2,"box":"\#(b)"}],"idem":"abcdefghijklmnop"}"#).get()
        #expect(rekey.operation == .panicRekey(stream: StreamID("AAECAwQFBgcICQoLDA0ODw"), ownerToken: "t",
                                               keys: E2EKeys(kid: Self.kid, boxes: [MemberBox(member: 2, box: Self.box(4))])))
        #expect(rekey.operation.changesState && RequestDecoder.idempotentOperations.contains("panic.rekey"))
        // Refusals, each with its own code.
        #expect(code(#"{"op":"panic.start","status":"red","lat":1,"lon":2,"e2e":{"v":1,"kid":"\#(kid)","sealed":"\#(s)"}}"#) == "invalid_e2e")
        #expect(code(#"{"op":"panic.start","status":"red","e2e":{"v":2,"kid":"\#(kid)","sealed":"\#(s)"}}"#) == "unsupported_e2e_version")
        #expect(code(#"{"op":"panic.start","status":"red","e2e":{"v":1,"kid":"\#(kid)","sealed":"\#(s)","boxes":[]}}"#) == "invalid_boxes")
        #expect(code(#"{"op":"panic.update","stream":"x","sealed":"\#(Self.sealed(3, count: 121).text)","kid":"\#(kid)","seq":2,"status":"red"}"#) == "sealed_too_large")
        #expect(code(#"{"op":"panic.update","stream":"x","sealed":"\#(s)","kid":"short","seq":2,"status":"red"}"#) == "invalid_kid")
        #expect(code(#"{"op":"panic.update","stream":"x","lat":1,"lon":2,"seq":2}"#) == "invalid_e2e")
        #expect(code(#"{"op":"panic.update","stream":"x","lat":1,"lon":2,"status":"red"}"#) == "invalid_e2e")
        #expect(code(#"{"op":"panic.rekey","stream":"x"}"#) == "missing_field")
        #expect(code(#"{"op":"panic.rekey","stream":"x","kid":"\#(kid)","lat":1}"#) == "unknown_field")
    }

    @Test func failuresAreAnsweredWithTheirCodesAndTheMismatchSaysWhatToSealFor() {
        let mismatch = RequestError.from(.seqMismatch(currentSeq: 7, status: .amber))
        #expect(mismatch.code == "seq_mismatch" && mismatch.currentSeq == 7 && mismatch.currentStatus == .amber)
        #expect(RequestError.from(.sealedRequired).code == "sealed_required" && RequestError.from(.notE2E).code == "not_e2e")
    }
}
