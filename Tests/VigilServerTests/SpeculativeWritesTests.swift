import Testing
import VigilReplication
@testable import VigilCore
import VigilGeo
import VigilNATS
import VigilState
import VigilTestSupport
@testable import VigilServer

/// `SpeculativeWrites` driven by its events alone: no server, no stream, no sockets. Each test
/// checks the actions in order (`describe` names them).
@Suite struct SpeculativeWritesTests {
    typealias Action = SpeculativeWrites.Action

    static func id(_ n: UInt64) -> PinID { PinID(high: 7, low: n) }

    static func pin(_ n: UInt64) -> Pin {
        Pin(id: id(n), point: GeoPoint(lat: 1, lon: 2), title: "t", description: "", category: "general",
            createdAt: 5, expiresAt: 9, editDigest: TokenDigest(bytes: [UInt8](repeating: 1, count: 32)))
    }

    /// One action as a line: what it does and to whom.
    static func describe(_ action: Action) -> String {
        switch action {
        case .publish(let n, let p): return "publish \(n) \(p.messageID)"
        case .takeBack(.pinCreated(let id)): return "takeBack \(id.low)"
        case .takeBack: return "takeBack other"
        case .reply(let fd, _, .error(let e)): return "reply \(fd) \(e.code)"
        case .reply(let fd, _, _): return "reply \(fd) ok"
        case .repeated(let fd, _, _): return "repeated \(fd)"
        case .keep: return "keep"
        case .countRepublished: return "republished"
        }
    }

    static func publication(_ n: UInt64) -> SpeculativeWrites.Publication {
        .init(record: .pinPut(pin(n)), kept: nil, subject: "T.pins.s00", messageID: "a-\(n)", base: nil)
    }

    /// Write `n` by `fd` creating pin `pinNumber`, its events to `recipients`.
    @discardableResult
    static func hold(_ w: inout SpeculativeWrites, _ n: UInt64, pin pinNumber: UInt64, fd: Int32, recipients: [Int32] = [],
                     idem: InFlightAnswer? = nil, now: Int64 = 0) -> String {
        var events = Deliveries()
        if !recipients.isEmpty { events.pins.append(PinDelivery(kind: .added, pin: pin(pinNumber), recipients: recipients)) }
        let action = w.hold(n, entity: .pin(id(pinNumber)), undo: .pinCreated(id(pinNumber)), fd: fd, ref: .number(Double(n)),
                            reply: .ok, events: &events, owner: nil, publication: publication(n), idem: idem, nowMs: now)
        #expect(events.pins.isEmpty)  // taken into the write
        return describe(action)
    }

    static func stream(_ w: inout SpeculativeWrites, _ n: UInt64?, pin pinNumber: UInt64, kept: KeptAnswer? = nil)
        -> (SpeculativeWrites.Streamed, [String], Deliveries) {
        var actions: [Action] = []
        var deliveries = Deliveries()
        let step = w.streamed(n, entity: .pin(id(pinNumber)), kept: kept, into: &actions, deliveries: &deliveries)
        return (step, actions.map(describe), deliveries)
    }

    @Test func aHeldWriteIsPublishedAndConfirmedWithItsReplyAndEvents() {
        var w = SpeculativeWrites()
        w.opened(3)
        #expect(Self.hold(&w, 1, pin: 1, fd: 3, recipients: [4, 5]) == "publish 1 a-1")
        #expect(w.pendingCount == 1)
        let (step, actions, deliveries) = Self.stream(&w, 1, pin: 1)
        guard case .confirmed = step else { Issue.record("not confirmed: \(step)"); return }
        #expect(actions == ["reply 3 ok"])
        #expect(deliveries.pins.map(\.recipients) == [[4, 5]])
        #expect(w.isEmpty && w.counts.confirmed == 1 && w.counts.applied == 0)
    }

    @Test func anotherNodesRecordTakesBackOursNewestFirstAndOursIsThenAnsweredWithTheOutcome() {
        var w = SpeculativeWrites()
        Self.hold(&w, 1, pin: 9, fd: 3)
        Self.hold(&w, 2, pin: 9, fd: 3)
        Self.hold(&w, 3, pin: 8, fd: 3)  // another entity: untouched
        let (step, actions, _) = Self.stream(&w, nil, pin: 9)
        guard case .apply(let own, _) = step else { Issue.record("not applied: \(step)"); return }
        #expect(own == nil)
        #expect(actions == ["takeBack 9", "takeBack 9"])
        #expect(w.counts.takenBack == 2 && w.pendingCount == 3)
        // Our first write comes next: taken back already, so applied like anyone's and answered.
        let (step1, actions1, _) = Self.stream(&w, 1, pin: 9)
        guard case .apply(let own1?, _) = step1 else { Issue.record("not ours: \(step1)"); return }
        #expect(actions1.isEmpty)  // nothing left in place on pin 9
        var answers: [Action] = []
        w.settled(own1, .conflict("the pin changed"), into: &answers)
        #expect(answers.map(Self.describe) == ["reply 3 conflict"])
        #expect(w.counts.conflicts == 1 && w.pendingCount == 2)
        // Pin 8's write is still the oldest in place on its entity: confirmed.
        guard case .confirmed = Self.stream(&w, 3, pin: 8).0 else { Issue.record("pin 8 not confirmed"); return }
    }

    @Test func aDefiniteFailureGivesUpAtOnceAndAnAmbiguousOneIsSentAgainWhenDue() {
        var w = SpeculativeWrites()
        Self.hold(&w, 1, pin: 1, fd: 3, now: 1000)
        Self.hold(&w, 2, pin: 2, fd: 3, now: 1000)
        var actions: [Action] = []
        w.publishFailed(1, .api(JSAPIError(code: 400, errorCode: 10000, description: "refused")), nowMs: 1010, ackTimeoutMs: 500,
                        deadlineMs: 10_000, retryAfterMs: 250, into: &actions)
        #expect(actions.map(Self.describe) == ["takeBack 1", "reply 3 unavailable"])
        actions.removeAll()
        w.publishFailed(2, .client(.connectionLost), nowMs: 1010, ackTimeoutMs: 500, deadlineMs: 10_000, retryAfterMs: 250,
                        into: &actions)
        #expect(actions.isEmpty)
        let due = w.republishAt(2)
        #expect(due != nil)
        w.tick(nowMs: (due ?? 0) - 1, deadlineMs: 10_000, retryAfterMs: 250, into: &actions)
        #expect(actions.isEmpty)
        w.tick(nowMs: due ?? 0, deadlineMs: 10_000, retryAfterMs: 250, into: &actions)
        #expect(actions.map(Self.describe) == ["republished", "publish 2 a-2"])  // the same message id
        #expect(w.republishAt(2) == nil && w.pendingCount == 1)
    }

    @Test func aWriteNotHandedBackByTheDeadlineIsTakenBackAndAnsweredUnavailable() {
        var w = SpeculativeWrites()
        Self.hold(&w, 1, pin: 1, fd: 3, now: 1000)
        var actions: [Action] = []
        w.tick(nowMs: 11_000, deadlineMs: 10_000, retryAfterMs: 250, into: &actions)
        #expect(actions.isEmpty)  // exactly the deadline: not yet
        w.tick(nowMs: 11_001, deadlineMs: 10_000, retryAfterMs: 250, into: &actions)
        #expect(actions.map(Self.describe) == ["takeBack 1", "reply 3 unavailable"])
        #expect(w.isEmpty && w.counts.expired == 1 && w.counts.takenBack == 1)
        // The stream has it after all: applied like anyone's, nothing of ours to answer.
        guard case .apply(nil, _) = Self.stream(&w, 1, pin: 1).0 else { Issue.record("not applied as another's"); return }
    }

    @Test func aWriterThatClosedIsNotAnsweredAndItsFDsNextOwnerIsNot() {
        var w = SpeculativeWrites()
        w.opened(3)
        Self.hold(&w, 1, pin: 1, fd: 3, recipients: [3, 4])
        w.closed(3)
        w.opened(3)  // the fd given to a new connection
        let (_, actions, deliveries) = Self.stream(&w, 1, pin: 1)
        #expect(actions.isEmpty)
        #expect(deliveries.pins.map(\.recipients) == [[4]])
    }

    @Test func aRecipientThatChangedWhatItFollowsAfterTheWriteGetsNoHeldEvent() {
        var w = SpeculativeWrites()
        for fd: Int32 in [3, 4, 5] { w.opened(fd) }
        Self.hold(&w, 1, pin: 1, fd: 3, recipients: [4, 5])
        w.membershipChanged(5)  // its reply showed the write already
        Self.hold(&w, 2, pin: 2, fd: 3, recipients: [4, 5])
        #expect(w.changedConnectionCount == 1)
        #expect(Self.stream(&w, 1, pin: 1).2.pins.map(\.recipients) == [[4]])
        #expect(Self.stream(&w, 2, pin: 2).2.pins.map(\.recipients) == [[4, 5]])  // made after the change
        #expect(w.isEmpty && w.changedConnectionCount == 0)
    }

    static func idem(_ byte: UInt8) -> InFlightAnswer {
        let kept = KeptAnswer(lookup: [UInt8](repeating: byte, count: 32), requestDigest: [UInt8](repeating: byte, count: 32),
                              createdAt: 1, sealed: [1, 2, 3])
        return InFlightAnswer(lookup: kept.lookup, members: [9], kept: kept, address: 42)
    }

    @Test func aRepeatWaitsForTheWriteAndGetsItsAnswerAsARepeat() {
        var w = SpeculativeWrites()
        for fd: Int32 in [3, 4, 5] { w.opened(fd) }
        let idem = Self.idem(1)
        Self.hold(&w, 1, pin: 1, fd: 3, idem: idem)
        #expect(w.wait(lookup: idem.lookup, requestDigest: [UInt8](repeating: 2, count: 32), fd: 5, ref: nil) == .conflict)
        #expect(w.wait(lookup: idem.lookup, requestDigest: idem.kept.requestDigest, fd: 4, ref: nil) == .waiting)
        #expect(w.wait(lookup: [UInt8](repeating: 3, count: 32), requestDigest: idem.kept.requestDigest, fd: 4, ref: nil) == .none)
        let (_, actions, _) = Self.stream(&w, 1, pin: 1, kept: idem.kept)
        #expect(actions == ["keep", "repeated 4", "reply 3 ok"])
        #expect(w.wait(lookup: idem.lookup, requestDigest: idem.kept.requestDigest, fd: 4, ref: nil) == .none)  // answered
    }

    @Test func aRepeatOfAWriteGivenUpGetsItsError() {
        var w = SpeculativeWrites()
        for fd: Int32 in [3, 4] { w.opened(fd) }
        let idem = Self.idem(1)
        Self.hold(&w, 1, pin: 1, fd: 3, idem: idem, now: 0)
        _ = w.wait(lookup: idem.lookup, requestDigest: idem.kept.requestDigest, fd: 4, ref: nil)
        var actions: [Action] = []
        w.tick(nowMs: 20_000, deadlineMs: 10_000, retryAfterMs: 250, into: &actions)
        #expect(actions.map(Self.describe) == ["takeBack 1", "reply 4 unavailable", "reply 3 unavailable"])
    }

    @Test func takingBackAllGoesNewestFirstAndResetForgetsEverything() {
        var w = SpeculativeWrites()
        for n: UInt64 in 1...4 { Self.hold(&w, n, pin: n, fd: 3) }
        var actions: [Action] = []
        w.takeBackAll(into: &actions)
        #expect(actions.map(Self.describe) == ["takeBack 4", "takeBack 3", "takeBack 2", "takeBack 1"])
        actions.removeAll()
        w.takeBackAll(into: &actions)
        #expect(actions.isEmpty)  // each once
        w.reset()
        #expect(w.isEmpty && w.numbers.isEmpty)
    }
}

extension SpeculativeWrites.Wait: Equatable {}

/// `UnconfirmedChanges` against a plain model: random appends, settles and take-backs.
@Suite struct UnconfirmedChangesTests {
    @Test(arguments: [1, 2, 3, 4, 5] as [UInt64])
    func matchesAModel(seed: UInt64) {
        var rng = SplitMix64(state: seed)
        var list = UnconfirmedChanges<Int>()
        var model: [(number: UInt64, entity: Int, takenBack: Bool)] = []
        var next: UInt64 = 1
        for _ in 0..<3000 {
            switch rng.next() % 10 {
            case 0...4:
                let entity = Int(rng.next() % 5)
                list.append(next, entity: .pin(PinID(high: 0, low: UInt64(entity))), undo: nil, held: Int(next))
                model.append((next, entity, false))
                next += 1
            case 5...7 where !model.isEmpty:
                // the oldest mostly (the stream's common case), any one sometimes
                let i = rng.next() % 4 == 0 ? Int(rng.next() % UInt64(model.count)) : 0
                let number = model[i].number
                let entity = PinID(high: 0, low: UInt64(model[i].entity))
                let oldest = model.first { $0.entity == model[i].entity }?.number == number && !model[i].takenBack
                #expect(list.isOldestInPlace(number, on: .pin(entity)) == oldest)
                #expect(list.settle(number)?.held == Int(number))
                model.remove(at: i)
                #expect(list.settle(number) == nil)
            case 8:
                let entity = Int(rng.next() % 5)
                var taken: [Int] = []
                list.takeBack(on: .pin(PinID(high: 0, low: UInt64(entity)))) { _, held in taken.append(held) }
                let expected = model.indices.reversed().filter { model[$0].entity == entity && !model[$0].takenBack }
                #expect(taken == expected.map { Int(model[$0].number) })
                for i in expected { model[i].takenBack = true }
            default:
                let probe = rng.next() % (next + 1)
                #expect((list[probe] != nil) == model.contains { $0.number == probe })
            }
            #expect(list.count == model.count)
            #expect(list.oldest?.number == model.first?.number)
        }
        var all: [UInt64] = []
        list.forEach { all.append($0.number) }
        #expect(all == model.map(\.number))
    }
}
