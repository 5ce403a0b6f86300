import Testing
@testable import VigilCore
import VigilTestSupport

/// The safety timer (walk-me-home): set, moved, cancelled or ended before it is due, nothing
/// happens; past it, the hub escalates the stream once, on its own, and keeps it open.
@Suite struct PanicHubSafetyTimerTests {
    static let due: Int64 = 600_000

    /// An amber stream started at 0 with a timer due at `due`, watched by connection 7.
    func walk(_ rig: inout PanicRig, timer: PanicTimer = .at(due)) -> (id: StreamID, owner: String) {
        let r = try! rig.hub.start(owner: 1, status: .amber, location: PanicRig.at(0), note: nil, watchers: 1, timer: timer,
                                   secrets: rig.secrets, now: 0, out: &rig.out).get()
        #expect(rig.watch(r.stream.id, 7, r.watchTokens[0]).ok)
        _ = rig.take()
        return (r.stream.id, r.ownerToken)
    }

    func setTimer(_ rig: inout PanicRig, _ id: StreamID, _ timer: PanicTimer, by c: WatcherID = 1, token: String? = nil,
                           now: Int64) -> Result<PanicChange, PanicFailure> {
        rig.hub.setTimer(id, by: c, ownerToken: token, timer: timer, secrets: rig.secrets, now: now, out: &rig.out)
    }

    /// The escalations among deliveries: (event, recipients).
    static func escalations(_ deliveries: [PanicDelivery]) -> [(PanicEvent, [WatcherID])] {
        deliveries.compactMap { d in
            guard case .event(let e) = d.kind, case .missedCheckIn = e.kind else { return nil }
            return (e, d.recipients)
        }
    }

    @Test func aMissedDeadlineEscalatesOnceWithTheLastPosition() throws {
        var rig = PanicRig()
        let (id, _) = walk(&rig)
        #expect(rig.hub.stream(id)?.dueAt == Self.due)
        #expect(rig.hub.timerDeadlines.min?.at == Self.due)
        rig.update(id, 3, now: 200_000)                          // a location does not check in
        rig.tick(Self.due - 1)
        #expect(Self.escalations(rig.take()).isEmpty && rig.hub.stream(id)?.status == .amber)

        let changed = rig.tick(Self.due)
        let out = rig.take()
        let escalations = Self.escalations(out)
        try #require(escalations.count == 1)
        let (event, recipients) = escalations[0]
        #expect(recipients == [1, 7], "every watcher, and the owner's connection")
        #expect(event.seq == 3 && event.at == Self.due)
        #expect(event.kind == .missedCheckIn(dueAt: Self.due, last: LastLocation(location: PanicRig.at(3), at: 200_000), sentAt: Self.due))
        #expect(changed == [StreamEvent(stream: id, event: event)], "returned for the journal")
        let stream = try #require(rig.hub.stream(id))
        #expect(stream.status == .red && stream.dueAt == nil && stream.missedCheckInAt == Self.due && stream.isActive)
        #expect(stream.missedCheckInSentAt == Self.due, "noticed at its deadline: sent then")

        // Exactly once: later ticks, however far, do not repeat it, nor end the stream.
        #expect(rig.tick(Self.due + 1).isEmpty)
        rig.tick(10 * 86_400_000)
        #expect(Self.escalations(rig.take()).isEmpty)
        #expect(rig.hub.stream(id)?.isActive == true, "open until its owner ends it: never abandoned")
        #expect(rig.end(id, now: 10 * 86_400_000 + 1).ok)
        #expect(rig.hub.stream(id)?.ended?.reason == .safe)
    }

    @Test func endingOrCancellingBeforeTheDeadlineMeansNothingHappens() {
        var rig = PanicRig()
        let (ended, _) = walk(&rig)
        let (cancelled, _) = walk(&rig)
        #expect(rig.end(ended, now: Self.due - 1).ok)
        #expect(setTimer(&rig, cancelled, .cancel, now: Self.due - 1) == .success(.recorded(
            PanicEvent(seq: 2, at: Self.due - 1, kind: .timer(dueAt: nil)))))
        _ = rig.take()
        #expect(rig.tick(Self.due + 1).isEmpty)
        #expect(Self.escalations(rig.take()).isEmpty)
        #expect(rig.hub.stream(ended)?.ended?.reason == .safe && rig.hub.stream(ended)?.dueAt == nil)
        #expect(rig.hub.stream(cancelled)?.status == .amber && rig.hub.stream(cancelled)?.dueAt == nil)
        // Cancelling no timer changes nothing.
        #expect(setTimer(&rig, cancelled, .cancel, now: Self.due + 2) == .success(.unchanged(seq: 2)))
    }

    @Test func extendingMovesTheDeadlineAndTellsTheWatchers() throws {
        var rig = PanicRig()
        let (id, _) = walk(&rig)
        let moved = setTimer(&rig, id, .inSeconds(900), now: 500_000)
        #expect(moved == .success(.recorded(PanicEvent(seq: 2, at: 500_000, kind: .timer(dueAt: 1_400_000)))))
        let told = rig.take()
        #expect(told.count == 1 && told[0].recipients == [7] && seqs(told) == [2])
        rig.tick(Self.due)                                       // the old deadline: its entry is skipped
        #expect(Self.escalations(rig.take()).isEmpty && rig.hub.stream(id)?.status == .amber)
        rig.tick(1_399_999)
        #expect(Self.escalations(rig.take()).isEmpty)
        rig.tick(1_400_000)
        #expect(Self.escalations(rig.take()).map(\.0.at) == [1_400_000])
        // Shortening works too, and the same deadline again is no change.
        let (other, _) = walk(&rig)
        #expect(setTimer(&rig, other, .at(Self.due), now: 10) == .success(.unchanged(seq: 1)))
        #expect(setTimer(&rig, other, .at(300_000), now: 10).ok)
        _ = rig.take()
        rig.tick(300_000)
        #expect(Self.escalations(rig.take()).count == 1)
    }

    @Test func deadlinesAreCheckedAfterTheToken() {
        var rig = PanicRig(PanicSettings(maxTimerMs: 3_600_000))
        let (id, owner) = walk(&rig)
        #expect(setTimer(&rig, id, .at(100), by: 9, now: 100).failure == .forbidden, "a stranger learns nothing")
        #expect(setTimer(&rig, id, .at(100), by: 9, token: owner, now: 100).failure == .invalidTimer)
        #expect(setTimer(&rig, id, .at(50), now: 100).failure == .invalidTimer, "in the past")
        #expect(setTimer(&rig, id, .at(3_600_101), now: 100).failure == .invalidTimer, "past the longest timer")
        #expect(setTimer(&rig, id, .at(3_600_100), now: 100).ok)
        #expect(rig.status(id, .red, now: 200).ok)
        #expect(setTimer(&rig, id, .inSeconds(60), now: 300).failure == .timerNeedsAmber)
        #expect(setTimer(&rig, id, .cancel, now: 300).ok, "cancelling works on any active stream")
        #expect(rig.end(id, now: 400).ok)
        #expect(setTimer(&rig, id, .inSeconds(60), now: 500).failure == .ended)
        let red = rig.hub.start(owner: 1, status: .red, location: PanicRig.at(0), note: nil, watchers: 1, timer: .inSeconds(60),
                                secrets: rig.secrets, now: 0, out: &rig.out)
        #expect(red.failure == .timerNeedsAmber)
        let far = rig.hub.start(owner: 1, status: .amber, location: PanicRig.at(0), note: nil, watchers: 1, timer: .inSeconds(3601),
                                secrets: rig.secrets, now: 0, out: &rig.out)
        #expect(far.failure == .invalidTimer)
    }

    /// A red status set by the owner while a timer runs keeps the timer: if the phone then goes
    /// silent, the watchers still learn that it missed its check-in.
    @Test func aTimerOnAStreamTurnedRedStillFires() {
        var rig = PanicRig()
        let (id, _) = walk(&rig)
        #expect(rig.status(id, .red, now: 1000).ok)
        _ = rig.take()
        rig.tick(Self.due)
        #expect(Self.escalations(rig.take()).count == 1)
        #expect(rig.hub.stream(id)?.missedCheckInAt == Self.due)
    }

    /// The event's time never goes back before the stream's last event (a location that came
    /// between the deadline and the tick); it is sent when the tick noticed it, and never before
    /// its time, even on a clock that went back since the last event.
    @Test func aLateTickKeepsEventTimesInOrder() throws {
        var rig = PanicRig()
        let (id, _) = walk(&rig)
        rig.update(id, 2, now: Self.due + 30)
        _ = rig.take()
        rig.tick(Self.due + 50)
        let escalations = Self.escalations(rig.take())
        #expect(escalations.map(\.0.at) == [Self.due + 30])
        #expect(escalations.map(\.0.kind.sentAt) == [Self.due + 50])
        #expect(rig.hub.stream(id)?.missedCheckInAt == Self.due + 30 && rig.hub.stream(id)?.missedCheckInSentAt == Self.due + 50)

        let (behind, _) = walk(&rig)
        rig.update(behind, 2, now: Self.due + 30)
        _ = rig.take()
        rig.tick(Self.due + 20)                                  // the clock went back 10 ms
        let late = Self.escalations(rig.take())
        #expect(late.map(\.0.at) == [Self.due + 30] && late.map(\.0.kind.sentAt) == [Self.due + 30])
    }

    @Test func restoredTimersFireOnTimeOrAtOnceIfTheyPassedWhileDown() throws {
        var rig = PanicRig()
        let (early, _) = walk(&rig)
        let (late, _) = walk(&rig, timer: .at(2 * Self.due))
        let saved = rig.hub.exportStreams()

        // Restarted before either deadline: each fires at its own.
        var again = PanicRig()
        again.hub.restoreStreams(saved, now: 1000)
        #expect(again.hub.timerDeadlines.min?.at == Self.due)
        #expect(again.tick(Self.due - 1).isEmpty)
        #expect(again.tick(Self.due).map(\.stream) == [early])
        #expect(again.tick(2 * Self.due).map(\.stream) == [late])

        // Restarted after both (down for a day): the first tick fires both, each at its deadline,
        // and abandonment, due as well, does not end them.
        var afterDowntime = PanicRig()
        afterDowntime.hub.restoreStreams(saved, now: 90_000_000)
        let fired = afterDowntime.tick(90_000_000)
        #expect(fired.map(\.event.at) == [Self.due, 2 * Self.due])
        // Their time is the deadline; when they went out is the first tick after the restart.
        #expect(fired.map(\.event.kind.sentAt) == [90_000_000, 90_000_000])
        #expect(afterDowntime.hub.stream(early)?.missedCheckInSentAt == 90_000_000)
        #expect(fired.allSatisfy { if case .missedCheckIn = $0.event.kind { true } else { false } })
        #expect(afterDowntime.hub.activeCount == 2)
        #expect(afterDowntime.tick(200_000_000).isEmpty)

        // A stream restored already escalated stays so, and is not abandoned either.
        var escalatedAgain = PanicRig()
        escalatedAgain.hub.restoreStreams(afterDowntime.hub.exportStreams(), now: 300_000_000)
        #expect(escalatedAgain.tick(400_000_000).isEmpty && escalatedAgain.hub.activeCount == 2)
        #expect(escalatedAgain.hub.stream(late)?.missedCheckInSentAt == 90_000_000, "kept, not the restart's clock")
    }

    @Test func anUndoneExtensionPutsTheOldDeadlineBack() {
        var rig = PanicRig()
        let (id, _) = walk(&rig)
        let before = rig.hub.checkpoint(id)!
        #expect(setTimer(&rig, id, .inSeconds(3600), now: 100).ok)
        rig.hub.revert(to: before, connected: { _ in true })
        #expect(rig.hub.stream(id)?.dueAt == Self.due && rig.hub.stream(id)?.seq == 1)
        _ = rig.take()
        #expect(rig.tick(Self.due).count == 1)
        #expect(rig.tick(3_600_100).isEmpty, "the undone deadline's entry is skipped")
    }

    /// An owner moving the timer over and over leaves the heap bounded (entries of moved
    /// deadlines are dropped when it is rebuilt), and only the last deadline fires.
    @Test func movingTheTimerOftenKeepsTheHeapBounded() {
        var rig = PanicRig()
        let (id, _) = walk(&rig)
        for i in 1...5000 {
            #expect(setTimer(&rig, id, .at(Self.due + Int64(i)), now: Int64(i)).ok)
        }
        #expect(rig.hub.timerDeadlines.count <= 2 * 512 + 1)
        _ = rig.take()
        #expect(rig.tick(Self.due + 4999).isEmpty)
        #expect(rig.tick(Self.due + 5000).count == 1)
    }

    /// Seeded random timer changes, status changes, locations, ends, ticks and restarts against a
    /// model of each stream's deadline: every tick escalates exactly the active streams whose
    /// deadline the model says has passed, each once, at that deadline; every answer is the one
    /// the rules give.
    @Test(arguments: [1, 2, 3, 4, 5, 6] as [UInt64])
    func randomTimerOperationsMatchAModel(seed: UInt64) throws {
        struct Model { var token: String; var due: Int64?; var red = false; var ended = false; var escalations = 0 }
        let maxTimer: Int64 = 3_600_000
        var rig = PanicRig(PanicSettings(endedGraceMs: 1_000_000_000_000, maxStreams: 1000, abandonAfterMs: 7_200_000, maxTimerMs: maxTimer))
        let dice = TestSecrets(seed: seed)
        func roll(_ n: Int) -> Int { Int(dice.next() % UInt64(n)) }
        var models: [StreamID: Model] = [:]
        var now: Int64 = 0

        // `rig` is passed, not captured: a captured variable is checked for exclusive access as
        // a whole, and `rig.hub.start(..., out: &rig.out)` touches two of its parts at once.
        func checkTick(_ changed: [StreamEvent], _ hub: PanicHub) {
            var fired = Set<StreamID>()
            for c in changed {
                if case .ended(.abandoned) = c.event.kind {
                    #expect(models[c.stream]?.escalations == 0 && models[c.stream]?.due == nil, "escalated or timed streams are not abandoned")
                    models[c.stream]?.ended = true
                    continue
                }
                guard case .missedCheckIn(let due, _, let sentAt) = c.event.kind else { continue }
                let first = fired.insert(c.stream).inserted
                #expect(first, "once per tick")
                #expect(models[c.stream]?.due == due && due <= now)
                #expect(sentAt == max(now, c.event.at), "sent at the tick, never before its time")
                models[c.stream]?.due = nil
                models[c.stream]?.red = true
                models[c.stream]?.escalations += 1
            }
            for (id, m) in models where !m.ended {
                #expect(m.due.map { $0 > now } ?? true, "a passed deadline that did not fire")
                #expect(hub.stream(id)?.dueAt == m.due)
            }
        }

        for _ in 0..<1200 {
            let ids = models.keys.sorted()
            let id = ids.isEmpty ? nil : ids[roll(ids.count)]
            switch roll(12) {
            case 0, 1:
                let amber = roll(4) != 0
                let timer: PanicTimer? = roll(3) == 0 ? nil : .inSeconds(Int64(1 + roll(3600)))
                let r = rig.hub.start(owner: 1, status: amber ? .amber : .red, location: PanicRig.at(0), note: nil, watchers: 1,
                                      timer: timer, secrets: rig.secrets, now: now, out: &rig.out)
                if timer != nil && !amber {
                    #expect(r.failure == .timerNeedsAmber)
                } else if let s = try? r.get().stream {
                    models[s.id] = Model(token: try r.get().ownerToken, due: timer?.dueAt(now: now), red: !amber)
                }
            case 2, 3, 4:
                guard let id, let m = models[id] else { continue }
                let timer: PanicTimer
                switch roll(3) {
                case 0: timer = .cancel
                case 1: timer = .inSeconds(Int64(1 + roll(4000)))
                default: timer = .at(now + Int64(roll(4_000_000)) - 1000)
                }
                let due = timer.dueAt(now: now)
                let result = setTimer(&rig, id, timer, now: now)
                if m.ended {
                    #expect(result.failure == .ended)
                } else if let due, !(due > now && due <= now + maxTimer) {
                    #expect(result.failure == .invalidTimer)
                } else if due != nil && m.red {
                    #expect(result.failure == .timerNeedsAmber)
                } else if due == m.due {
                    #expect(result == .success(.unchanged(seq: rig.hub.stream(id)!.seq)), "the deadline it has: no event")
                } else {
                    #expect(result.ok)
                    models[id]?.due = due
                }
            case 5:
                guard let id, let m = models[id], !m.ended else { continue }
                let red = roll(2) == 0
                #expect(rig.status(id, red ? .red : .amber, now: now).ok)
                models[id]?.red = red
            case 6:
                guard let id, let m = models[id], !m.ended else { continue }
                #expect(rig.end(id, now: now).ok)
                models[id]?.ended = true
                models[id]?.due = nil
            case 7:
                guard let id, let m = models[id], !m.ended else { continue }
                #expect(rig.update(id, 1, now: now).ok)   // not a check-in: the deadline stays
            case 8:
                // A restart: streams out and back in, no connections; timers re-armed.
                var again = PanicRig(rig.hub.settings)
                again.hub.restoreStreams(rig.hub.exportStreams(), now: now)
                rig.hub = again.hub
                for (id, m) in models { #expect(rig.hub.resume(id, by: 1, ownerToken: m.token, secrets: rig.secrets).ok) }
            default:
                now += Int64(roll(400_000))
                let changed = rig.tick(now)
                checkTick(changed, rig.hub)
            }
            _ = rig.take()
        }
        now += 2 * maxTimer
        let changed = rig.tick(now)
        checkTick(changed, rig.hub)
        #expect(models.values.allSatisfy { $0.ended || $0.due == nil })
        #expect(models.values.contains { $0.escalations > 0 })
        for (id, m) in models where m.escalations > 0 && !m.ended {
            #expect(rig.hub.stream(id)?.isActive == true, "escalated streams are never abandoned")
        }
    }
}

extension PanicEventKind {
    /// An escalation's `sentAt` (nil for any other kind), for the assertions on it.
    var sentAt: Int64? {
        if case .missedCheckIn(_, _, let sentAt) = self { return sentAt }
        return nil
    }
}
