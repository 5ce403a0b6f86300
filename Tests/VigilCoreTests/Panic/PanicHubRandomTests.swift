import Testing
@testable import VigilCore
import VigilTestSupport

/// Seeded random operations against a small model of who watches what. After every operation:
/// every event went, exactly once and in seq order, to exactly the connections watching its stream;
/// seqs are contiguous per stream; replay + live is the whole sequence; counts reach the owner.
@Suite struct PanicHubRandomTests {
    struct Model {
        var owner: WatcherID?
        var ownerToken: String
        var live: [String]
        var dead: [String] = []
        var log: [PanicEvent]                       // every event of the stream, seq order
        var next: [WatcherID: UInt64] = [:]         // watcher → the seq it must receive next
        var ended = false
    }

    @Test(arguments: [1, 2, 3, 4, 5, 6, 7, 8] as [UInt64])
    func randomOperationsKeepTheInvariants(seed: UInt64) throws {
        let settings = PanicSettings(historyEvents: 6, staleAfterMs: 30_000, endedGraceMs: 90_000,
                                     maxWatchTokens: 4, maxStreams: 5, maxWatchersOnStart: 3,
                                     abandonAfterMs: 50_000, reservedShare: 0.4)
        var hub = PanicHub(settings: settings)
        let secrets = TestSecrets(seed: seed)
        let dice = TestSecrets(seed: seed &* 31 &+ 17)
        func roll(_ n: Int) -> Int { Int(dice.next() % UInt64(n)) }
        var models: [StreamID: Model] = [:]
        var gone: [StreamID] = []
        var now: Int64 = 0
        var eventsDelivered = 0, replayed = 0, gaps = 0, abandoned = 0, reserveRefusals = 0

        func pickStream() -> StreamID? {
            if !gone.isEmpty && roll(8) == 0 { return gone[roll(gone.count)] }
            let ids = models.keys.sorted()
            return ids.isEmpty ? nil : ids[roll(ids.count)]
        }

        /// Checks the deliveries of one operation against the model and advances it.
        func absorb(_ out: [PanicDelivery]) throws {
            for d in out {
                #expect(!d.recipients.isEmpty && d.recipients == d.recipients.sorted())
                var m = try #require(models[d.stream])
                switch d.kind {
                case .event(let e):
                    #expect(Set(d.recipients) == Set(m.next.keys))
                    #expect(e == m.log.last)
                    for w in d.recipients {
                        #expect(m.next[w] == e.seq)
                        m.next[w] = e.seq + 1
                        eventsDelivered += 1
                    }
                case .stale(let since):
                    #expect(Set(d.recipients) == Set(m.next.keys))
                    #expect(since == hub.stream(d.stream)!.lastLocationAt && !m.ended)
                case .revoked:
                    for w in d.recipients { #expect(m.next.removeValue(forKey: w) != nil) }
                case .watchers(let count):
                    #expect(d.recipients == [m.owner!] && count == m.next.count)
                case .rekeyed:
                    Issue.record("no stream here is end-to-end encrypted")
                }
                models[d.stream] = m
            }
        }

        /// Records the event an operation says it applied (read back from the hub's history).
        func logged(_ id: StreamID, _ seq: UInt64) {
            let e = hub.stream(id)!.history.all.last!
            #expect(e.seq == seq && seq == UInt64(models[id]!.log.count) + 1)
            models[id]!.log.append(e)
        }

        for _ in 0..<5_000 {
            var out: [PanicDelivery] = []
            let c = WatcherID(1 + roll(8))
            switch roll(17) {
            case 0, 1:
                let n = 1 + roll(3)
                let eligible = roll(2) == 0
                let r = hub.start(owner: c, status: .red, location: PanicRig.at(Double(roll(100))), note: nil, watchers: n,
                                  reserveEligible: eligible, secrets: secrets, now: now, out: &out)
                switch r {
                case .failure(.reserveOnly):
                    #expect(!eligible && hub.count >= settings.unreservedStreams && hub.count < settings.maxStreams)
                    reserveRefusals += 1
                case .failure(let f):
                    #expect(f == .capacityExceeded && hub.count >= settings.maxStreams)
                case .success(let s):
                    #expect(s.stream.seq == 1 && s.watchTokens.count == n && s.stream.owner == c)
                    models[s.stream.id] = Model(owner: c, ownerToken: s.ownerToken, live: s.watchTokens, log: s.stream.history.all)
                }
            case 2, 3, 4, 5, 6, 7:
                guard let id = pickStream() else { continue }
                let m = models[id]
                let c = roll(2) == 0 ? (m?.owner ?? c) : c            // mostly the phone itself
                let useToken = roll(2) == 0
                let token = useToken ? (roll(5) == 0 ? "bogus" : m?.ownerToken) : nil
                let allowed = m != nil && (m!.owner == c || (token != nil && token == m!.ownerToken))
                let r: Result<PanicChange, PanicFailure>
                let kind = roll(30)
                let status: PanicStatus = roll(2) == 0 ? .red : .amber
                let before = hub.stream(id)?.status
                if kind < 24 {
                    r = hub.update(id, by: c, ownerToken: token, location: PanicRig.at(Double(roll(100))), secrets: secrets, now: now, out: &out)
                        .map { _ in .recorded(hub.stream(id)!.history.all.last!) }
                } else if kind < 29 {
                    r = hub.setStatus(id, by: c, ownerToken: token, status: status, secrets: secrets, now: now, out: &out)
                } else {
                    r = hub.end(id, by: c, ownerToken: token, reason: .safe, secrets: secrets, now: now, out: &out)
                        .map { _ in .recorded(hub.stream(id)!.history.all.last!) }
                }
                if !allowed {
                    #expect(r.failure == .forbidden)
                } else if m!.ended {
                    #expect(r.failure == .ended)
                } else {
                    switch try r.get() {
                    case .recorded(let event):
                        logged(id, event.seq)
                    case .unchanged(let seq):                                  // the same status: no event
                        #expect(kind >= 24 && kind < 29 && before == status && seq == UInt64(m!.log.count))
                    }
                    if kind == 29 { models[id]!.ended = true }
                }
            case 8, 9, 10:
                guard let id = pickStream() else { continue }
                let m = models[id]
                let token: String
                switch roll(6) {
                case 0: token = m?.dead.first ?? "bogus"
                case 1: token = m?.ownerToken ?? "bogus"
                default: token = m.flatMap { $0.live.isEmpty ? nil : $0.live[roll($0.live.count)] } ?? "bogus"
                }
                let current = UInt64(m?.log.count ?? 0)
                let since: UInt64?
                switch roll(4) {
                case 0: since = nil
                case 1: since = m?.next[c].map { $0 - 1 } ?? current
                default: since = UInt64(roll(Int(current) + 2))
                }
                let r = hub.watch(id, watcher: c, watchToken: token, since: since, secrets: secrets, out: &out)
                guard let m, m.live.contains(token) else { #expect(r.failure == .forbidden); break }
                if let since, since > current { #expect(r.failure == .sinceAhead); break }
                let w = try r.get()
                #expect(w.stream.seq == current)
                if let since {
                    let held = UInt64(settings.historyEvents)
                    let first = current > held ? current - held + 1 : 1     // oldest seq still held
                    if since + 1 >= first {
                        #expect(!w.gap && w.events == Array(m.log[Int(since)...]))
                        replayed += w.events.count
                    } else {
                        #expect(w.gap && w.events.isEmpty)
                        gaps += 1
                    }
                } else {
                    #expect(!w.gap && w.events.isEmpty)
                }
                // Subscribe in the model before the count delivery is checked.
                if models[id]!.next[c] == nil { models[id]!.next[c] = current + 1 }
                else { #expect(out.isEmpty) }
            case 11:
                guard let id = pickStream() else { continue }
                hub.unwatch(id, watcher: c, out: &out)
                if let w = models[id]?.next.removeValue(forKey: c) { _ = w } else { #expect(out.isEmpty) }
            case 12:
                hub.disconnected(c, out: &out)
                for id in models.keys {
                    if models[id]!.owner == c { models[id]!.owner = nil }
                    models[id]!.next[c] = nil
                }
            case 13:
                guard let id = pickStream(), let m = models[id] else { continue }
                let token = roll(4) == 0 ? (m.dead.first ?? "bogus") : (m.live.isEmpty ? "bogus" : m.live[roll(m.live.count)])
                let byToken = m.owner != c
                let r = hub.revoke(id, by: c, ownerToken: byToken ? m.ownerToken : nil, watchToken: token, secrets: secrets, out: &out)
                if let i = models[id]!.live.firstIndex(of: token) {
                    #expect(r == .success(.revoked))
                    models[id]!.live.remove(at: i)
                    models[id]!.dead.append(token)
                } else {
                    #expect(r == .success(.notLive) && out.isEmpty, "a token that is not live: nothing changes")
                }
            case 14:
                guard let id = pickStream(), let m = models[id] else { continue }
                let r = hub.invite(id, by: c, ownerToken: m.ownerToken, secrets: secrets)
                if m.ended { #expect(r.failure == .ended) }
                else if m.live.count >= settings.maxWatchTokens { #expect(r.failure == .tooManyWatchTokens) }
                else { models[id]!.live.append(try r.get()) }
            case 15:
                guard let id = pickStream(), let m = models[id] else { continue }
                let r = hub.resume(id, by: c, ownerToken: m.ownerToken, secrets: secrets)
                #expect(r.ok)
                models[id]!.owner = c
            default:
                now += Int64(roll(20_000))
                // Streams whose owner fell silent for `abandonAfterMs` end, at that deadline, with
                // the next seq; the model logs each end before the deliveries are checked.
                for ended in hub.tick(now: now, out: &out) {
                    let m = try #require(models[ended.stream])
                    let last = try #require(m.log.last)
                    #expect(!m.ended && ended.event == PanicEvent(seq: last.seq + 1, at: last.at + settings.abandonAfterMs, kind: .ended(.abandoned)))
                    models[ended.stream]!.log.append(ended.event)
                    models[ended.stream]!.ended = true
                    abandoned += 1
                }
                for (id, m) in models where !m.ended {
                    #expect(hub.stream(id)!.updatedAt + settings.abandonAfterMs > now, "an overdue stream was not abandoned")
                }
            }
            try absorb(out)
            for id in models.keys where hub.stream(id) == nil {          // swept after grace
                #expect(models[id]!.ended)
                models[id] = nil
                gone.append(id)
            }
            // No lost update: every watcher has had every event so far; the model and the hub agree.
            for (id, m) in models {
                let s = hub.stream(id)!
                #expect(s.seq == UInt64(m.log.count) && s.owner == m.owner && (s.ended != nil) == m.ended)
                #expect(Set(s.watchers.keys) == Set(m.next.keys))
                #expect(m.next.values.allSatisfy { $0 == s.seq + 1 })
                #expect(s.watchTokens.count == m.live.count)
                #expect(s.history.all == Array(m.log.suffix(settings.historyEvents)))
            }
            #expect(hub.count == models.count)
        }
        // The run exercised what it checks.
        #expect(eventsDelivered > 400 && replayed > 100 && gaps > 10 && abandoned > 3 && reserveRefusals > 3,
                "\(eventsDelivered) events, \(replayed) replayed, \(gaps) gaps, \(abandoned) abandoned, \(reserveRefusals) reserve refusals")
    }
}
