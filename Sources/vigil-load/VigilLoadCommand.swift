import ArgumentParser
import Glibc
import VigilLoad
import VigilLoop

@main
struct VigilLoadCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "vigil-load",
        abstract: "Drives a running vigild with realistic traffic, checks nothing is lost, and reports what it saw.",
        discussion: """
            Every scenario ramps up its connections, measures for --duration seconds, drains (waits
            for every answer and event), verifies correctness and closes. Exit status: 0 when no
            error was seen, 1 on any loss, wrong delivery, error reply or dropped connection,
            2 when the run cannot start (fd limit), 64 on bad usage.
            """,
        version: BuildInfo.description,
        subcommands: [MapCommand.self, ClustersCommand.self, PanicCommand.self, IdleCommand.self, MixedCommand.self, AbuseCommand.self]
    )
}

/// Options every scenario takes.
struct CommonOptions: ParsableArguments {
    @Option(help: ArgumentHelp("""
        The daemon's WebSocket URL (ws://HOST:PORT/PATH or wss://HOST:PORT/PATH; loopback only in tests; \
        default ws://127.0.0.1:8080/v1). Give it once per node of a cluster (up to 16) to spread the \
        connections over them (map, panic, mixed, idle; see vigil-load map --help).
        """, valueName: "url"))
    var url: [String] = []

    @Flag(name: .customLong("cluster-checks"), help: "Check as for several nodes even with one --url (a load balancer in front of a cluster): a node may apply a change after another node's ok; map ends with a barrier pin per checked subscriber; panic retries watches a node refuses because the stream has not reached it yet. On whenever --url is given more than once.")
    var clusterChecks = false

    @Option(help: ArgumentHelp("For wss://: verify the server's certificate against this CA (PEM). Without it the certificate is not checked (a throwaway loopback certificate).", valueName: "file"))
    var ca: String?

    @Flag(help: "Offer permessage-deflate: the daemon then sends its events compressed, and this client inflates them.")
    var deflate = false

    @Option(help: "Seconds of measured traffic after the ramp-up.")
    var duration: Double = 10

    @Option(help: "Seed of every random choice, so a run can be repeated.")
    var seed: UInt64 = 1

    @Option(name: .customLong("server-pid"), help: "vigild's pid: report its CPU, RSS, peak RSS and fds from /proc. Give it once per node to report their sum.")
    var serverPID: [Int32] = []

    @Option(help: "Also write the result as JSON to this file.")
    var json: String?

    @Option(help: "Also write an SVG latency-percentile plot to this file.")
    var svg: String?

    @Option(name: .customLong("connect-rate"), help: "New connections per second during the ramp-up.")
    var connectRate = 5_000

    @Option(name: .customLong("max-connecting"), help: "Connections in handshake at once during the ramp-up.")
    var maxConnecting = 500

    @Option(name: .customLong("ramp-timeout"), help: "Seconds the ramp-up may take before measuring starts anyway.")
    var rampTimeout: Double = 120

    @Option(name: .customLong("drain-timeout"), help: "Seconds to wait for outstanding answers and events after the traffic stops.")
    var drainTimeout: Double = 15

    @Option(name: .customLong("tick-ms"), help: "Milliseconds between the client's pacing ticks: requests due since the last tick go out together, so a tick of T sends its traffic in bursts T apart (5 before issue 13 made the default 1).")
    var tickMs = 1

    @Flag(name: .customLong("no-progress"), help: "No progress line (it is shown only on a terminal anyway).")
    var noProgress = false

    @Flag(name: .customLong("progress-lines"), help: "Print the progress as one line per second even without a terminal (for logs).")
    var progressLines = false

    /// The `--url`s in order (the default when none was given).
    var urls: [String] { url.isEmpty ? ["ws://127.0.0.1:8080/v1"] : url }

    /// Whether the checks must allow for several nodes.
    var severalNodes: Bool { urls.count > 1 || clusterChecks }

    /// For the scenarios whose checks assume one node.
    func requireOneNode(_ scenario: String) throws {
        guard !severalNodes else {
            throw ValidationError("\(scenario) takes one --url and no --cluster-checks: its checks assume one node")
        }
    }

    func validate() throws {
        for text in urls where LoadURL(text) == nil {
            throw ValidationError("--url must look like ws://127.0.0.1:8080/v1 or wss://127.0.0.1:8443/v1, not \(text)")
        }
        guard urls.count <= 16 else { throw ValidationError("--url: at most 16 nodes") }
        guard duration > 0 else { throw ValidationError("--duration must be positive") }
        guard connectRate > 0, maxConnecting > 0 else { throw ValidationError("--connect-rate and --max-connecting must be positive") }
        guard (1...100).contains(tickMs) else { throw ValidationError("--tick-ms must be 1...100") }
    }

    /// Runs a scenario to the end, prints the table, writes the files, and exits 1 on any error.
    func run(_ make: () -> Scenario) throws {
        ProcessLimits.ignoreSIGPIPE()
        let fdLimit = (try? ProcessLimits.raiseFileDescriptorLimit()) ?? 1024
        let scenario = make()
        if scenario.targetConnections + 64 > fdLimit {
            writeStandardError("vigil-load: \(scenario.targetConnections) connections need more file descriptors than this process may open (\(fdLimit)); raise the hard limit (ulimit -Hn) first\n")
            throw ExitCode(2)
        }
        let targets = urls.map { LoadURL($0)! }
        var tls: TLSContext?
        if targets.contains(where: \.secure) {
            do {
                tls = try TLSContext.client(caFile: ca)  // the chain is checked; the host is a numeric loopback address
            } catch {
                throw ValidationError("--url: \(error)")
            }
        }
        let pool = try ClientPool(urls: targets, seed: seed, validateText: false, tls: tls)
        pool.offerDeflate = deflate
        let driver = Driver(pool: pool, scenario: scenario, options: .init(
            durationSeconds: duration, rampTimeoutSeconds: rampTimeout, drainTimeoutSeconds: drainTimeout,
            connectRate: connectRate, maxConnecting: maxConnecting, serverPIDs: serverPID, tickMs: tickMs,
            progress: !noProgress && (progressLines || isatty(STDERR_FILENO) == 1), progressNewlines: progressLines))
        try driver.run()
        let report = ReportBuilder.build(driver: driver, scenario: scenario, fdLimit: fdLimit)
        print(report.renderTable())
        if let json {
            try writeFile(json, report.renderJSON())
        }
        if let svg {
            let curves = scenario.latencies.filter { $0.1.count > 0 }.map { ($0.0, $0.1.percentileCurve()) }
            try writeFile(svg, LatencyPlot.svg(curves: curves))
        }
        if report.totalErrors > 0 { throw ExitCode(1) }
    }

    private func writeFile(_ path: String, _ text: String) throws {
        guard let f = fopen(path, "w") else {
            throw ValidationError("cannot write \(path): \(String(cString: strerror(errno)))")
        }
        fputs(text, f)
        fclose(f)
    }
}

struct MapCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "map",
        abstract: "Map subscribers with city-sized viewports, and publishers creating, moving, voting and deleting pins.",
        discussion: """
            Several nodes: give --url once per node. Publisher p goes to node p mod n, subscribers \
            round robin within their sample (checked, timed, the rest), so (n-1)/n of the \
            deliveries cross nodes and every node has its share of each sample; each op's stamp names its \
            node and the report adds deliveries per node and the event latency per pair of nodes \
            ("map event 0→1": published on node 0, delivered by node 1). The exactness check then \
            allows a node to apply a change after the writer's ok (before or after it, both are \
            right), and takes the subscriber's own deliveries as its clock: once its node showed it \
            a change, every change acknowledged before that one was sent must have been applied \
            there too (one replicated log, one order). Each checked subscriber ends with a barrier: \
            after the last ok it creates a pin in its area and waits for its added, so nothing of \
            the run is left in flight when it unsubscribes (the pins need the limits lifted, as \
            benchmarks/vigild-bench.yaml does).
            """)
    @OptionGroup var common: CommonOptions
    @Option(help: "Subscriber connections.") var subscribers = 1_000
    @Option(help: "Publisher connections.") var publishers = 10
    @Option(help: "Pin operations per second over all publishers; 0 = as fast as the server answers (closed loop, --window per publisher).")
    var rate: Double = 1_000
    @Option(help: "Operations in flight per publisher when --rate is 0.") var window = 16
    @Option(help: "Live pins each publisher keeps (creates until it has them).") var pinsPerPublisher = 50
    @Option(help: "The region pins and viewports are spread over: south,west,north,east.")
    var region = "47.3,5.9,55.0,15.0"
    @Option(name: .customLong("viewport-km"), help: "Viewport width and height in km (city-sized).") var viewportKm: Double = 20
    @Flag(name: .customLong("same-viewport"), help: "Every subscriber watches the whole region (fan-out at its widest).")
    var sameViewport = false
    @Option(help: "Fraction of subscribers that pan (re-subscribe) every --pan-interval seconds.") var panning = 0.1
    @Option(name: .customLong("pan-interval"), help: "Seconds between re-subscribes of a panning subscriber.") var panInterval: Double = 5
    @Flag(help: "Publishers create their pins before the measured window (which then starts with the map full).")
    var prefill = false
    @Option(name: .customLong("check-subscribers"), help: "Subscribers that record every event for the exactness check.") var checkSubscribers = 20
    @Option(name: .customLong("latency-subscribers"), help: "Subscribers that time every event they get (the rest only count).") var latencySubscribers = 100
    @Option(help: "More subscribers, watching the whole region, that stop reading once subscribed (small receive buffers); left out of the latency and checks, the report says how the server dealt with them.")
    var stalled = 0
    @Option(help: "Share of pins created with a range_m (Radar reach, 0...1). Subscribers then send a viewer position (three in four), one move in four sets, changes or removes a range, and the exactness check applies the reach rule.")
    var range = 0.0

    func validate() throws {
        guard (0...1).contains(range) else { throw ValidationError("--range is a share of pins, 0...1") }
        guard subscribers >= 0, publishers >= 1, rate >= 0, window >= 1, pinsPerPublisher >= 1, stalled >= 0 else {
            throw ValidationError("--publishers, --window and --pins-per-publisher must be at least 1; --subscribers and --rate at least 0")
        }
        guard MapScenario.parseRegion(region) != nil else { throw ValidationError("--region must be south,west,north,east in degrees") }
        guard (0...1).contains(panning), panInterval > 0, viewportKm > 0 else { throw ValidationError("--panning is 0...1; --pan-interval and --viewport-km positive") }
    }

    func run() throws {
        try common.run { MapScenario(config: mapConfig) }
    }

    var mapConfig: MapScenario.Config {
        .init(subscribers: subscribers, publishers: publishers, rate: rate, window: window,
              pinsPerPublisher: pinsPerPublisher, region: MapScenario.parseRegion(region)!, viewportKm: viewportKm,
              sameViewport: sameViewport, panning: panning, panIntervalSeconds: panInterval, prefill: prefill,
              checkSubscribers: checkSubscribers, latencySubscribers: latencySubscribers, seed: common.seed,
              stalled: stalled, rangeShare: range, nodes: common.urls.count, severalNodes: common.severalNodes)
    }
}

struct ClustersCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "clusters",
        abstract: "Cluster subscribers (\"view\":\"clusters\") over parts of a country, and the map's publishers changing pins across it.",
        discussion: """
            Checks that each checked subscriber's view (its reply with every clusters.changed applied) \
            equals a fresh subscribe's once the publishers stop and the last changes are out, that no \
            subscriber gets two clusters.changed less than --interval-ms (minus --pacing-slack-ms) \
            apart, and that nothing is refused or dropped.
            """)
    @OptionGroup var common: CommonOptions
    @Option(help: "Cluster subscriber connections.") var subscribers = 1_000
    @Option(name: .customLong("check-subscribers"), help: "Subscribers that keep their view for the convergence check (the rest count cells and time their messages only).")
    var checkSubscribers = 100
    @Option(name: .customLong("min-area"), help: "Each subscriber watches a random part of the region: this share of its height and width (each) up to all of it, so precisions and covers differ.")
    var minArea = 0.3
    @Option(name: .customLong("interval-ms"), help: "The daemon's pins.cluster_interval_ms (the pacing check's floor).") var intervalMs = 1_000
    @Option(name: .customLong("pacing-slack-ms"), help: "How much closer than --interval-ms two clusters.changed may arrive (the client's own receive delays).")
    var pacingSlackMs = 20
    @Option(help: "Publisher connections.") var publishers = 10
    @Option(help: "Pin operations per second over all publishers.") var rate: Double = 200
    @Option(help: "Live pins each publisher keeps (creates until it has them).") var pinsPerPublisher = 100
    @Option(help: "The region pins and subscribers' areas lie in: south,west,north,east.") var region = "47.3,5.9,55.0,15.0"
    @Flag(help: "Publishers create their pins before the measured window.") var prefill = false

    func validate() throws {
        try common.requireOneNode("clusters")
        guard subscribers >= 1, checkSubscribers >= 0, publishers >= 1, rate > 0, pinsPerPublisher >= 1 else {
            throw ValidationError("--subscribers, --publishers and --pins-per-publisher must be at least 1, --rate positive, --check-subscribers at least 0")
        }
        guard (0.01...1).contains(minArea) else { throw ValidationError("--min-area is a share of the region, 0.01...1") }
        guard (100...60_000).contains(intervalMs), pacingSlackMs >= 0, pacingSlackMs < intervalMs else {
            throw ValidationError("--interval-ms is 100...60000 (as pins.cluster_interval_ms); --pacing-slack-ms 0 up to it")
        }
        guard MapScenario.parseRegion(region) != nil else { throw ValidationError("--region must be south,west,north,east in degrees") }
    }

    func run() throws {
        let publishing = MapScenario.Config(
            subscribers: 0, publishers: publishers, rate: rate, window: 16, pinsPerPublisher: pinsPerPublisher,
            region: MapScenario.parseRegion(region)!, viewportKm: 20, sameViewport: false, panning: 0, panIntervalSeconds: 5,
            prefill: prefill, checkSubscribers: 0, latencySubscribers: 0, seed: common.seed)
        let config = ClusterScenario.Config(subscribers: subscribers, checkSubscribers: checkSubscribers, intervalMs: intervalMs,
                                            slackMs: pacingSlackMs, minAreaShare: minArea, seed: common.seed)
        try common.run { ClusterScenario(config: config, publishers: publishing) }
    }
}

struct PanicCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "panic",
        abstract: "Panic streams updating at a rate, each with watchers that check seq continuity; some watchers reconnect with since.",
        discussion: """
            Several nodes: give --url once per node. Owner o goes to node o mod n; watcher k \
            (0-based) of a stream whose owner is on node i goes to node (i + k + 1) mod n, so with \
            fewer watchers than nodes none shares its owner's node; a watcher that reconnects comes \
            back on the next node, with since. The report adds deliveries per node, the share that \
            crossed nodes, and the location latency per pair of nodes ("panic location 0→1": owner \
            on node 0, watcher on node 1; one clock, as the send time is noted by this process). A \
            watch a node refuses because the stream (forbidden) or its latest seq (invalid_since) \
            has not reached it yet is sent again after 10 ms, doubling up to 200 ms, 30 times \
            (about 5 s), and counted.
            """)
    @OptionGroup var common: CommonOptions
    @Option(help: "Active panic streams.") var streams = 1_000
    @Option(help: "Watchers (contacts) per stream.") var watchers = 3
    @Option(help: "Location updates per second per stream.") var rate: Double = 1
    @Option(name: .customLong("streams-per-owner"), help: "Streams started by each owner connection (1 = one phone each).") var streamsPerOwner = 1
    @Option(name: .customLong("watches-per-connection"), help: "Streams each watcher connection watches (a contact watching several people).") var watchesPerConnection = 1
    @Option(name: .customLong("reconnects"), help: "Watcher connections per second that drop and come back with since.") var reconnects: Double = 1
    @Option(name: .customLong("stalled-watchers"), help: "More watcher connections that stop reading once their watches are accepted (small receive buffers); left out of the latency and the normal checks, the report says how the server dealt with them.")
    var stalledWatchers = 0
    @Option(name: .customLong("stalled-watches"), help: "Streams each stalled watcher watches (0: every stream).") var stalledWatches = 0
    @Flag(name: .customLong("owners-own-address"), help: "Each owner connects from an address of its own (127.200.x.y), as phones do: the daemon's per-address budgets then apply as in production.")
    var ownersOwnAddress = false
    @Flag(name: .customLong("round-coordinates"), help: "Owners send coordinates rounded to 7 decimals (about 1 cm), as phones' fixes have no more precision; by default full doubles (17 digits).")
    var roundCoordinates = false
    @Flag(name: .customLong("e2e"), help: "End-to-end encrypted streams: starts and updates carry a sealed value of a real one's size (random bytes: the daemon cannot open them, so they cost it the same) instead of coordinates.")
    var e2e = false

    func validate() throws {
        guard streams >= 1, (1...16).contains(watchers), rate > 0, rate <= 100, streamsPerOwner >= 1, watchesPerConnection >= 1, reconnects >= 0,
              stalledWatchers >= 0, stalledWatches >= 0 else {
            throw ValidationError("--streams ≥ 1, --watchers 1...16, --rate 0...100 Hz, --streams-per-owner and --watches-per-connection ≥ 1, --reconnects, --stalled-watchers and --stalled-watches ≥ 0")
        }
    }

    func run() throws {
        try common.run { PanicScenario(config: panicConfig) }
    }

    var panicConfig: PanicScenario.Config {
        .init(streams: streams, watchersPerStream: watchers, rateHz: rate, streamsPerOwner: streamsPerOwner,
              watchesPerConnection: watchesPerConnection, reconnectsPerSecond: reconnects, seed: common.seed,
              stalledWatchers: stalledWatchers, stalledWatches: stalledWatches, ownersOwnAddress: ownersOwnAddress,
              bucketNs: UInt64(common.tickMs) * 1_000_000, roundCoordinates: roundCoordinates,
              e2e: e2e, nodes: common.urls.count, severalNodes: common.severalNodes)
    }
}

struct IdleCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "idle",
        abstract: "Idle connections held open: with --server-pid, the daemon's memory per connection.")
    @OptionGroup var common: CommonOptions
    @Option(help: "Connections to hold.") var connections = 10_000

    func validate() throws {
        guard connections >= 1 else { throw ValidationError("--connections must be at least 1") }
    }

    func run() throws {
        try common.run { IdleScenario(connections: connections) }
    }
}

struct MixedCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "mixed",
        abstract: "Map and panic traffic together on one daemon (the map options, then the panic ones).")
    @OptionGroup var common: CommonOptions
    @Option(help: "Subscriber connections.") var subscribers = 1_000
    @Option(help: "Publisher connections.") var publishers = 10
    @Option(help: "Pin operations per second over all publishers.") var rate: Double = 500
    @Option(help: "Live pins each publisher keeps.") var pinsPerPublisher = 50
    @Option(help: "The region: south,west,north,east.") var region = "47.3,5.9,55.0,15.0"
    @Option(name: .customLong("viewport-km"), help: "Viewport size in km.") var viewportKm: Double = 20
    @Option(help: "Active panic streams.") var streams = 1_000
    @Option(help: "Watchers per stream.") var watchers = 3
    @Option(name: .customLong("panic-rate"), help: "Location updates per second per stream.") var panicRate: Double = 1

    func validate() throws {
        guard MapScenario.parseRegion(region) != nil else { throw ValidationError("--region must be south,west,north,east in degrees") }
        guard subscribers >= 0, publishers >= 1, rate > 0, streams >= 1, (1...16).contains(watchers), panicRate > 0 else {
            throw ValidationError("counts must be positive (--watchers 1...16)")
        }
    }

    func run() throws {
        let map = MapScenario.Config(
            subscribers: subscribers, publishers: publishers, rate: rate, window: 16, pinsPerPublisher: pinsPerPublisher,
            region: MapScenario.parseRegion(region)!, viewportKm: viewportKm, sameViewport: false, panning: 0.1,
            panIntervalSeconds: 5, prefill: false, checkSubscribers: 20, latencySubscribers: 100, seed: common.seed,
            nodes: common.urls.count, severalNodes: common.severalNodes)
        let panic = PanicScenario.Config(
            streams: streams, watchersPerStream: watchers, rateHz: panicRate, streamsPerOwner: 1,
            watchesPerConnection: 1, reconnectsPerSecond: 1, seed: common.seed &+ 1, bucketNs: UInt64(common.tickMs) * 1_000_000,
            nodes: common.urls.count, severalNodes: common.severalNodes)
        try common.run { MixedScenario(map: MapScenario(config: map), panic: PanicScenario(config: panic)) }
    }
}

struct AbuseCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "abuse",
        abstract: "Hostile clients from one address: reconnecting stream starters, vote floods, world-sized subscribes, revoke storms.",
        discussion: """
            Refusals are expected: the report counts per operation what was answered ok, refused (by
            error code) and cut off by a close (by close code). The exit status is 1 only when the
            server broke the contract (a reply to nothing, a request left unanswered on an open
            connection, an unreadable message). Run it beside a normal `vigil-load panic` to check
            that people in danger are still served.
            """)
    @OptionGroup var common: CommonOptions
    @Option(help: ArgumentHelp("Local address every abuser connects from (the daemon keeps its budgets per address). Default: 127.0.0.9 for a 127.x target, none otherwise.", valueName: "address"))
    var source: String?
    @Option(help: "Stream starter connections (each reconnects after every start).") var starters = 10
    @Option(name: .customLong("start-rate"), help: "panic.start attempts per second over all starters.") var startRate: Double = 50
    @Option(help: "Voter connections.") var voters = 10
    @Option(name: .customLong("vote-rate"), help: "pin.vote requests per second over all voters.") var voteRate: Double = 200
    @Option(name: .customLong("vote-pins"), help: "Pins the voters flood (created first, from the same address).") var votePins = 3
    @Option(name: .customLong("votes-per-connection"), help: "Votes a voter sends before it reconnects (past the session write burst, 30, they are refused).") var votesPerConnection = 40
    @Option(help: "World-subscriber connections.") var subscribers = 5
    @Option(name: .customLong("subscribe-rate"), help: "World-sized subscribes per second over all subscribers.") var subscribeRate: Double = 100
    @Option(help: "Revoker connections.") var revokers = 5
    @Option(name: .customLong("revoke-rate"), help: "panic.revoke requests per second over all revokers.") var revokeRate: Double = 200

    func validate() throws {
        try common.requireOneNode("abuse")
        guard starters >= 0, voters >= 0, subscribers >= 0, revokers >= 0, starters + voters + subscribers + revokers > 0 else {
            throw ValidationError("the abuser counts must be at least 0, and not all 0")
        }
        guard startRate >= 0, voteRate >= 0, subscribeRate >= 0, revokeRate >= 0, votePins >= 0, votesPerConnection >= 1 else {
            throw ValidationError("rates and --vote-pins must be at least 0, --votes-per-connection at least 1")
        }
        if let source, SocketAddress(host: source, port: 0) == nil {
            throw ValidationError("--source must be a numeric IP address")
        }
    }

    func run() throws {
        let host = LoadURL(common.urls[0])?.host ?? ""
        let config = AbuseScenario.Config(
            source: source ?? (host.hasPrefix("127.") ? "127.0.0.9" : nil),
            starters: starters, startRate: startRate, voters: voters, voteRate: voteRate, votePins: votePins,
            votesPerConnection: votesPerConnection, subscribers: subscribers, subscribeRate: subscribeRate,
            revokers: revokers, revokeRate: revokeRate, seed: common.seed)
        try common.run { AbuseScenario(config: config) }
    }
}
