import Glibc
import VigilCore
import VigilLoad

/// `abuse`: hostile clients, all from one source address, at set rates for the run's duration:
///
/// - **starters** connect, send `panic.start`, drop the connection at the reply and come back (a
///   script hoarding stream capacity; each reconnect is a new session, so only the per-address
///   budgets stop it);
/// - **voters** flood `pin.vote` (up and down at random) on a few pins, reconnecting every few votes;
/// - **subscribers** send world-sized `subscribe`s in a loop (and read what they get);
/// - **revokers** send `panic.revoke` storms: guessed stream ids and tokens, and random (never
///   live) watch tokens on the abusers' own streams.
///
/// Refusals are the expected outcome here, not errors: the report counts, per operation, the
/// requests sent, answered `ok`, refused (by error code) and left unanswered when the server
/// closed the connection (by close code). Errors are what the contract does not allow: a reply to
/// no request, an unreadable message, a request left unanswered on a connection that stays open.
/// Run it beside a normal `vigil-load panic` (another process, another source address) to see
/// that the daemon keeps serving people in danger.
final class AbuseScenario: Scenario {
    struct Config {
        var source: String?
        var starters: Int
        var startRate: Double
        var voters: Int
        var voteRate: Double
        var votePins: Int
        var votesPerConnection: Int
        var subscribers: Int
        var subscribeRate: Double
        var revokers: Int
        var revokeRate: Double
        var seed: UInt64
        var center: (lat: Double, lon: Double) = (52.52, 13.405)
    }

    enum Kind: Int, CaseIterable {
        case starter, voter, subscriber, revoker

        var op: String {
            switch self {
            case .starter: return "panic.start"
            case .voter: return "pin.vote"
            case .subscriber: return "subscribe"
            case .revoker: return "panic.revoke"
            }
        }
    }

    /// One abusive client: a slot that keeps coming back with a new connection.
    private struct Actor {
        var kind: Kind
        var connection: ClientConnection?
        var outstanding = 0
        /// Requests sent on the current connection.
        var sentHere = 0
        /// Set when the connection is gone (or must go): reconnect at the next tick.
        var reconnect = false
        var everOpened = false
    }

    let name = "abuse"
    let config: Config
    private(set) var counters = RunCounters()
    private var rng: SeededRandom
    private var writer = JSONWriter(capacity: 512)
    private var tallies: [OutcomeTally]
    private var setupTally = OutcomeTally(name: "pin.create (setup)")
    private var actors: [Actor] = []
    private var pacers: [RatePacer]
    private var nextActor: [Int]
    /// The actors of each kind, by kind.
    private var members: [[Int]]
    private var nextToOpen = 0
    private var poolRef: ClientPool?
    private var stopped = false
    private var connectsRefused: UInt64 = 0
    private var reconnects: UInt64 = 0

    // Setup: one connection creates the pins the voters flood.
    private var setupConnection: ClientConnection?
    private var setupPending = 0
    private var setupDone = false
    private var pinIDs: [String] = []
    /// The abusers' own streams (id, owner token), for revokes of tokens that are not live.
    private var ownStreams: [(id: String, owner: String)] = []

    private enum Role {
        static let setup = 1 << 40
    }

    init(config: Config) {
        self.config = config
        rng = SeededRandom(seed: config.seed)
        tallies = Kind.allCases.map { OutcomeTally(name: $0.op) }
        pacers = [RatePacer(perSecond: config.startRate), RatePacer(perSecond: config.voteRate),
                  RatePacer(perSecond: config.subscribeRate), RatePacer(perSecond: config.revokeRate)]
        nextActor = Array(repeating: 0, count: Kind.allCases.count)
        members = Array(repeating: [], count: Kind.allCases.count)
        for (kind, count) in [(Kind.starter, config.starters), (.voter, config.voters), (.subscriber, config.subscribers),
                              (.revoker, config.revokers)] {
            for _ in 0..<count {
                members[kind.rawValue].append(actors.count)
                actors.append(Actor(kind: kind))
            }
        }
    }

    var parameters: [(String, String)] {
        [("source address", config.source ?? "(spread)"),
         ("stream starters", "\(config.starters) connections, \(config.startRate) starts/s, reconnecting after each"),
         ("voters", "\(config.voters) connections, \(config.voteRate) votes/s on \(config.votePins) pins, reconnecting every \(config.votesPerConnection)"),
         ("world subscribers", "\(config.subscribers) connections, \(config.subscribeRate) subscribes/s"),
         ("revokers", "\(config.revokers) connections, \(config.revokeRate) revokes/s"), ("seed", "\(config.seed)")]
    }

    var targetConnections: Int { actors.count + 1 }
    var latencies: [(String, LatencyStats)] { [] }
    func takeIntervalP99() -> UInt64? { nil }

    // MARK: ramp-up

    func openNext(pool: ClientPool) -> Bool {
        poolRef = pool
        if nextToOpen == 0 {
            nextToOpen = 1
            if config.votePins > 0 && config.voters > 0 {
                setupConnection = pool.connect(tag: Role.setup, delegate: self, source: config.source)
                if setupConnection == nil { setupDone = true; connectsRefused += 1 }
            } else {
                setupDone = true
            }
            return true
        }
        let a = nextToOpen - 1
        guard a < actors.count else { return false }
        nextToOpen += 1
        connect(a)
        return true
    }

    private func connect(_ a: Int) {
        actors[a].reconnect = false
        actors[a].outstanding = 0
        actors[a].sentHere = 0
        actors[a].connection = poolRef?.connect(tag: a, delegate: self, source: config.source)
        if actors[a].connection == nil {
            connectsRefused += 1
            counters.connectFailures += 1
            actors[a].reconnect = true
        }
    }

    var isReady: Bool { setupDone && nextToOpen > actors.count && actors.allSatisfy { $0.everOpened || $0.reconnect } }

    // MARK: traffic

    func tick(nowNs: UInt64) {
        guard !stopped else { return }
        for a in actors.indices where actors[a].reconnect && actors[a].connection == nil {
            reconnects += 1
            connect(a)
        }
        for kind in Kind.allCases {
            let due = pacers[kind.rawValue].due(nowNs: nowNs)
            var done = 0
            while done < due, let a = nextReady(kind) {
                send(a)
                done += 1
            }
            if done < due { pacers[kind.rawValue].refund(due - done) }
        }
    }

    /// The next actor of this kind, round robin, that is open and free to send.
    private func nextReady(_ kind: Kind) -> Int? {
        let members = self.members[kind.rawValue]
        guard !members.isEmpty else { return nil }
        for step in 0..<members.count {
            let a = members[(nextActor[kind.rawValue] + step) % members.count]
            guard let c = actors[a].connection, c.isOpen, !actors[a].reconnect else { continue }
            // A starter has one start in flight; a subscriber one subscribe; the others pipeline.
            if (kind == .starter || kind == .subscriber) && actors[a].outstanding > 0 { continue }
            if kind == .voter && actors[a].sentHere >= config.votesPerConnection { continue }
            nextActor[kind.rawValue] = (nextActor[kind.rawValue] + step + 1) % members.count
            return a
        }
        return nil
    }

    private func send(_ a: Int) {
        guard let c = actors[a].connection else { return }
        let kind = actors[a].kind
        writer.reset()
        writer.beginObject()
        writer.field("op", kind.op)
        writer.field("ref", Int64(actors[a].sentHere))
        switch kind {
        case .starter:
            writer.field("status", "red")
            writer.field("lat", config.center.lat + Double.random(in: -0.2...0.2, using: &rng))
            writer.field("lon", config.center.lon + Double.random(in: -0.3...0.3, using: &rng))
            writer.field("watchers", Int64(1))
        case .voter:
            writer.field("id", pinIDs.randomElement(using: &rng) ?? GuessedSecret.make(length: 32, using: &rng))
            writer.field("value", Bool.random(using: &rng) ? Int64(1) : Int64(-1))
        case .subscriber:
            writer.key("area")
            writer.beginObject()
            writer.key("bbox")
            writer.beginArray()
            writer.double(-90); writer.double(-180); writer.double(90); writer.double(180)
            writer.endArray()
            writer.endObject()
        case .revoker:
            if Bool.random(using: &rng), let own = ownStreams.randomElement(using: &rng) {
                writer.field("stream", own.id)
                writer.field("owner_token", own.owner)
            } else {
                writer.field("stream", GuessedSecret.streamID(using: &rng))
                writer.field("owner_token", GuessedSecret.token(using: &rng))
            }
            writer.field("watch_token", GuessedSecret.token(using: &rng))
        }
        writer.endObject()
        c.sendText(writer)
        actors[a].outstanding += 1
        actors[a].sentHere += 1
        tallies[kind.rawValue].requestSent()
        counters.sent += 1
    }

    func stopSending(nowNs: UInt64) { stopped = true }

    /// Every request still on an open connection answered.
    var isDrained: Bool {
        actors.allSatisfy { $0.connection?.isOpen != true || $0.outstanding == 0 } && setupPending == 0
    }

    func verify() -> [CheckSummary] {
        var summaries: [CheckSummary] = []
        if config.votePins > 0 && config.voters > 0 { summaries.append(setupTally.summary()) }
        for kind in Kind.allCases {
            var tally = tallies[kind.rawValue]
            for a in actors.indices where actors[a].kind == kind && actors[a].connection?.isOpen == true && actors[a].outstanding > 0 {
                tally.error("\(kind.op): \(actors[a].outstanding) requests without a reply on an open connection")
            }
            summaries.append(tally.summary())
        }
        summaries.append(CheckSummary(name: "abuse connections", checked: actors.count, errors: CheckErrors(),
                                      counters: [("reconnects", reconnects), ("connects refused", connectsRefused),
                                                 ("own streams started", UInt64(ownStreams.count)), ("pins voted on", UInt64(pinIDs.count))]))
        return summaries
    }

    func closeAll() {
        setupConnection?.closeHandshake()
        for actor in actors { actor.connection?.closeHandshake() }
    }
}

extension AbuseScenario: ClientDelegate {
    func opened(_ connection: ClientConnection) {
        if connection.tag == Role.setup {
            for i in 0..<config.votePins {
                writer.reset()
                writer.beginObject()
                writer.field("op", "pin.create")
                writer.field("ref", Int64(i))
                writer.key("pin")
                writer.beginObject()
                writer.field("lat", config.center.lat + Double.random(in: -0.1...0.1, using: &rng))
                writer.field("lon", config.center.lon + Double.random(in: -0.1...0.1, using: &rng))
                writer.field("title", "vote me away")
                writer.endObject()
                writer.endObject()
                connection.sendText(writer)
                setupPending += 1
                setupTally.requestSent()
            }
            if setupPending == 0 { setupDone = true }
            return
        }
        actors[connection.tag].everOpened = true
    }

    func message(_ connection: ClientConnection, _ bytes: UnsafeRawBufferPointer) {
        // Only the reply's envelope matters; a world subscribe's reply can be large, and its pins
        // (and the events that follow) are only counted.
        if connection.tag != Role.setup, actors[connection.tag].kind == .subscriber, isPinEvent(bytes) {
            counters.delivered += 1
            return
        }
        guard case .object(let m)? = try? JSONParser.parse(bytes), let type = m["type"]?.string else {
            return counters.error("abuser: unparseable message")
        }
        if connection.tag == Role.setup { return setupMessage(type: type, m) }
        let a = connection.tag
        let kind = actors[a].kind
        switch type {
        case "ok", "error":
            guard actors[a].outstanding > 0 else {
                return tallies[kind.rawValue].error("\(kind.op): a reply to nothing")
            }
            actors[a].outstanding -= 1
            counters.acked += 1
            if type == "ok" {
                tallies[kind.rawValue].answeredOK()
                if kind == .starter, let id = m["stream"]?.string, let owner = m["owner_token"]?.string, ownStreams.count < 1_000 {
                    ownStreams.append((id, owner))
                }
            } else {
                tallies[kind.rawValue].refused(code: m["code"]?.string ?? "")
            }
            switch kind {
            case .starter:
                dropAndReturn(a, connection)
            case .voter where actors[a].sentHere >= config.votesPerConnection && actors[a].outstanding == 0:
                dropAndReturn(a, connection)
            default:
                break
            }
        case "welcome", "panic.watchers", "panic.stale":
            break
        default:
            if !type.hasPrefix("pin.") { tallies[kind.rawValue].error("\(kind.op): unexpected \(type)") }
        }
    }

    /// Drops the connection without a close (as a script does) and comes back at the next tick.
    private func dropAndReturn(_ a: Int, _ connection: ClientConnection) {
        connection.delegate = nil
        connection.abort()
        actors[a].connection = nil
        actors[a].reconnect = true
    }

    private func setupMessage(type: String, _ m: JSONObject) {
        switch type {
        case "ok":
            setupPending -= 1
            setupTally.answeredOK()
            if let id = m["pin"]?.object?["id"]?.string { pinIDs.append(id) }
        case "error":
            setupPending -= 1
            setupTally.refused(code: m["code"]?.string ?? "")
        default:
            break
        }
        if setupPending <= 0 { setupDone = true }
    }

    /// `{"type":"pin.` — a map event.
    private static let pinEventPrefix: [UInt8] = Array(#"{"type":"pin."#.utf8)

    private func isPinEvent(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard bytes.count > Self.pinEventPrefix.count else { return false }
        for (k, b) in Self.pinEventPrefix.enumerated() where bytes[k] != b { return false }
        return true
    }

    func closed(_ connection: ClientConnection, failure: String?) {
        if connection.tag == Role.setup {
            setupConnection = nil
            if failure != nil { setupTally.closedByServer(code: connection.serverCloseCode, outstanding: setupPending) }
            setupPending = 0
            setupDone = true
            return
        }
        let a = connection.tag
        guard actors[a].connection === connection else { return }
        actors[a].connection = nil
        actors[a].reconnect = true
        guard failure != nil else { return }
        if connection.everOpen {
            tallies[actors[a].kind.rawValue].closedByServer(code: connection.serverCloseCode, outstanding: actors[a].outstanding)
        } else {
            connectsRefused += 1
            counters.connectFailures += 1
        }
        actors[a].outstanding = 0
    }
}
