import VigilReplication
import VigilLoop
import VigilNATS
import Yams

/// One invalid value in a config file, named by its dotted key.
public struct ConfigIssue: Equatable, CustomStringConvertible, Sendable {
    public var key: String
    public var message: String
    public var line: Int?

    public init(key: String, message: String, line: Int? = nil) {
        self.key = key
        self.message = message
        self.line = line
    }

    public var description: String {
        let at = line.map { " (line \($0))" } ?? ""
        return "\(key)\(at): \(message)"
    }
}

/// The config file could not be used; `issues` lists every problem found, not just the first.
public struct ConfigError: Error, CustomStringConvertible {
    public var issues: [ConfigIssue]
    public init(issues: [ConfigIssue]) { self.issues = issues }
    public var description: String { issues.map(\.description).joined(separator: "\n") }
}

/// Reads vigild's YAML config (parsed by Yams) into a `ServerConfig`, checking every value.
///
/// Every key is optional (the built-in default applies); unknown keys are errors, because a typo
/// that silently keeps a default is how a production limit goes missing.
public enum ConfigLoader {
    /// A key path into the config; key path literals that capture nothing are Sendable (SE-0418).
    typealias Path<Value> = WritableKeyPath<ServerConfig, Value> & Sendable

    enum Kind: Sendable {
        case integer(ClosedRange<Int>, Path<Int>)
        case boolean(Path<Bool>)
        case address(Path<ListenAddress>)
        /// An address, or "off" (or empty) for none.
        case optionalAddress(Path<ListenAddress?>)
        /// Free text of at most 4096 bytes (cipher lists).
        case text(Path<String>)
        /// A list of IP addresses or prefixes (`10.0.0.0/8`, `::1`).
        case prefixes(Path<[String]>)
        case choice([String], Path<String>)
        case names(ClosedRange<Int>, Path<[String]>)
        case integer64(ClosedRange<Int64>, Path<Int64>)
        case path(Path<String>)
        /// A list of NATS server URLs (`nats://10.0.0.5:4222`, `tls://nats.example:4222`).
        case natsURLs(Path<[String]>)
        /// The `cluster.tls` mapping (its keys are checked one by one, `natsTLSKeys`).
        case natsTLS
        /// One name: 1 to 32 of a-z, 0-9, '_', '-' (`isName`).
        case name(Path<String>)
        /// A NATS cluster name (stream name and subject prefix).
        case replicationName(Path<String>)
        /// A position, `[latitude, longitude]` in degrees (-90...90, -180...180).
        case coordinate(Path<Double>, Path<Double>)
        /// `push.escalation`: a list of `{after_s: N, channels: [webpush, relay]}`.
        case escalation(Path<[PushConfig.EscalationStep]>)
        /// A key that is known but whose feature is not built yet: always an error, with the reason.
        case unsupported(String)
    }

    /// The schema: section → key → kind. `config/vigild.yaml` documents the same keys.
    static let schema: [(section: String, keys: [(String, Kind)])] = [
        ("server", [
            ("listen", .optionalAddress(\.listen)),
            ("backlog", .integer(1...65_535, \.backlog)),
            ("max_connections", .integer(1...10_000_000, \.maxConnections)),
            ("shutdown_grace_ms", .integer(0...600_000, \.shutdownGraceMs)),
            ("trusted_proxies", .prefixes(\.trustedProxies)),
        ]),
        ("admin", [
            ("listen", .optionalAddress(\.adminListen)),
        ]),
        ("tls", [
            ("listen", .optionalAddress(\.tlsListen)),
            ("certificate", .path(\.tlsCertificate)),
            ("private_key", .path(\.tlsPrivateKey)),
            ("min_version", .choice(TLSVersion.allCases.map(\.rawValue), \.tlsMinVersion)),
            ("ciphers", .text(\.tlsCiphers)),
            ("ciphersuites", .text(\.tlsCiphersuites)),
        ]),
        ("http", [
            ("handshake_timeout_ms", .integer(100...600_000, \.handshakeTimeoutMs)),
            ("max_request_head_bytes", .integer(1_024...1_048_576, \.maxRequestHeadBytes)),
        ]),
        ("websocket", [
            ("max_message_bytes", .integer(125...(64 * 1024 * 1024), \.maxMessageBytes)),
            ("ping_interval_ms", .integer(100...3_600_000, \.pingIntervalMs)),
            ("pong_timeout_ms", .integer(100...3_600_000, \.pongTimeoutMs)),
            ("close_timeout_ms", .integer(100...600_000, \.closeTimeoutMs)),
            ("max_output_buffer_bytes", .integer(16_384...(1024 * 1024 * 1024), \.maxOutputBufferBytes)),
            ("max_total_output_bytes", .integer(1_048_576...(1 << 40), \.maxTotalOutputBytes)),
            ("echo", .boolean(\.echoEnabled)),
        ]),
        ("compression", [
            ("enabled", .boolean(\.compressionEnabled)),
            ("server_max_window_bits", .integer(9...15, \.compressionServerMaxWindowBits)),
            ("client_max_window_bits", .integer(9...15, \.compressionClientMaxWindowBits)),
            ("memory_level", .integer(1...9, \.compressionMemoryLevel)),
            ("level", .integer(1...9, \.compressionLevel)),
            ("min_message_bytes", .integer(0...(64 * 1024 * 1024), \.compressionMinMessageBytes)),
        ]),
        ("session", [
            ("messages_per_second", .integer(1...100_000, \.messagesPerSecond)),
            ("message_burst", .integer(1...1_000_000, \.messageBurst)),
            ("subscribes_per_second", .integer(1...100_000, \.subscribesPerSecond)),
            ("subscribe_burst", .integer(1...1_000_000, \.subscribeBurst)),
        ]),
        ("limits", [
            ("panic_starts_per_hour", .integer(1...10_000_000, \.addressBudgets.panicStarts.refill)),
            ("panic_start_burst", .integer(1...10_000_000, \.addressBudgets.panicStarts.capacity)),
            ("open_streams_per_address", .integer(1...10_000_000, \.addressBudgets.maxOpenStreams)),
            ("pin_creates_per_hour", .integer(1...100_000_000, \.addressBudgets.pinCreates.refill)),
            ("pin_create_burst", .integer(1...100_000_000, \.addressBudgets.pinCreates.capacity)),
            ("live_pins_per_address", .integer(1...100_000_000, \.addressBudgets.maxLivePins)),
            ("subscribes_per_second", .integer(1...10_000_000, \.addressBudgets.subscribes.refill)),
            ("subscribe_burst", .integer(1...100_000_000, \.addressBudgets.subscribes.capacity)),
            ("tracked_addresses", .integer(1...100_000_000, \.addressBudgets.maxTrackedAddresses)),
            ("circle_creates_per_hour", .integer(1...10_000_000, \.addressBudgets.circleCreates.refill)),
            ("circle_create_burst", .integer(1...10_000_000, \.addressBudgets.circleCreates.capacity)),
        ]),
        ("idempotency", [
            ("window_s", .integer(1...31_536_000, \.idempotency.windowSeconds)),
            ("max_keys", .integer(0...100_000_000, \.idempotency.maxKeys)),
            ("max_keys_per_address", .integer(1...100_000_000, \.idempotency.maxKeysPerAddress)),
        ]),
        ("pins", [
            ("default_ttl_s", .integer(1...31_536_000, \.pins.defaultTTLSeconds)),
            ("min_ttl_s", .integer(1...31_536_000, \.pins.minTTLSeconds)),
            ("max_ttl_s", .integer(1...31_536_000, \.pins.maxTTLSeconds)),
            ("categories", .names(1...64, \.pins.categories)),
            ("vote_flag_threshold", .integer(1...1_000_000, \.pins.voteFlagThreshold)),
            ("writes_per_minute", .integer(1...1_000_000, \.pins.writesPerMinute)),
            ("write_burst", .integer(1...1_000_000, \.pins.writeBurst)),
            ("max_pins", .integer(1...100_000_000, \.pins.maxPins)),
            ("max_subscribe_pins", .integer(1...1_000_000, \.pins.maxSubscribePins)),
            ("cell_precision_min", .integer(1...2, \.pins.cellPrecisionMin)),
            ("cell_precision_max", .integer(1...12, \.pins.cellPrecisionMax)),
            ("cover_cell_budget", .integer(32...100_000, \.pins.coverCellBudget)),
            ("cluster_precision_min", .integer(1...2, \.pins.clusterPrecisionMin)),
            ("cluster_precision_max", .integer(1...8, \.pins.clusterPrecisionMax)),
            ("cluster_cell_budget", .integer(32...4_096, \.pins.clusterCellBudget)),
            ("cluster_interval_ms", .integer(100...60_000, \.pins.clusterIntervalMs)),
            ("title_max_bytes", .integer(4...65_536, \.pins.titleMaxBytes)),
            ("description_max_bytes", .integer(4...1_048_576, \.pins.descriptionMaxBytes)),
            ("max_voters_per_pin", .integer(1...1_000_000, \.pins.maxVotersPerPin)),
            ("max_range_m", .integer(1...20_000_000, \.pins.maxRangeMeters)),
        ]),
        ("panic", [
            ("history_events", .integer(1...100_000, \.panic.historyEvents)),
            ("stale_after_ms", .integer64(1_000...86_400_000, \.panic.staleAfterMs)),
            ("ended_grace_ms", .integer64(1_000...604_800_000, \.panic.endedGraceMs)),
            ("max_streams", .integer(1...10_000_000, \.panic.maxStreams)),
            ("max_watch_tokens", .integer(1...1_000, \.panic.maxWatchTokens)),
            ("max_watchers_on_start", .integer(1...1_000, \.panic.maxWatchersOnStart)),
            ("conflate_above_bytes", .integer(4_096...(1024 * 1024 * 1024), \.conflateAboveBytes)),
            ("abandon_after_ms", .integer64(60_000...31_536_000_000, \.panic.abandonAfterMs)),
            ("reserved_percent", .integer(0...90, \.panic.reservedPercent)),
            ("note_max_bytes", .integer(4...65_536, \.panic.noteMaxBytes)),
            ("max_timer_s", .integer(60...31_536_000, \.panic.maxTimerSeconds)),
            ("sealed_max_bytes", .integer(92...65_536, \.panic.sealedMaxBytes)),
        ]),
        ("checkin", [
            ("max_circles", .integer(1...10_000_000, \.checkin.maxCircles)),
            ("max_members", .integer(1...1_000, \.checkin.maxMembers)),
            ("requests_per_minute", .integer(1...600, \.checkin.requestsPerMinute)),
            ("idle_lifetime_s", .integer(2...31_536_000, \.checkin.idleLifetimeSeconds)),
            ("max_home_s", .integer(1...31_536_000, \.checkin.maxHomeSeconds)),
            ("label_max_bytes", .integer(4...4_096, \.checkin.labelMaxBytes)),
            ("note_max_bytes", .integer(4...65_536, \.checkin.noteMaxBytes)),
            ("max_subscriptions_per_holder", .integer(1...100, \.checkin.maxSubscriptionsPerHolder)),
        ]),
        ("push", [
            ("vapid_key_file", .path(\.push.vapidKeyFile)),
            ("vapid_subject", .text(\.push.vapidSubject)),
            ("relay_url", .text(\.push.relayURL)),
            ("relay_secret_file", .path(\.push.relaySecretFile)),
            ("allow_loopback_http", .boolean(\.push.allowLoopbackHTTP)),
            ("allow_private_addresses", .boolean(\.push.allowPrivateAddresses)),
            ("max_pending", .integer(1...100_000_000, \.push.maxPending)),
            // At most four weeks, the longest TTL push services keep a message for.
            ("ttl_s", .integer(1...2_419_200, \.push.ttlSeconds)),
            ("first_channels", .names(1...2, \.push.firstChannels)),
            ("escalation", .escalation(\.push.escalation)),
        ]),
        ("state", [
            ("directory", .path(\.stateDirectory)),
            ("snapshot_interval_s", .integer(1...86_400, \.snapshotIntervalSeconds)),
            ("fsync", .choice(["always", "interval", "off"], \.fsyncPolicy)),
            ("fsync_interval_ms", .integer(1...60_000, \.fsyncIntervalMs)),
        ]),
        ("web", [
            ("enabled", .boolean(\.webEnabled)),
            ("root", .path(\.webRoot)),
            ("leaflet", .path(\.webLeaflet)),
            ("tile_url", .text(\.webTileURL)),
            ("tile_attribution", .text(\.webTileAttribution)),
            ("map_center", .coordinate(\.webMapLatitude, \.webMapLongitude)),
            ("map_zoom", .integer(0...19, \.webMapZoom)),
        ]),
        ("cluster", [
            ("urls", .natsURLs(\.replication.urls)),
            ("name", .replicationName(\.replication.name)),
            ("node_id", .name(\.replication.nodeID)),
            ("user", .text(\.replication.user)),
            ("password", .text(\.replication.password)),
            ("token", .text(\.replication.token)),
            ("nkey_seed_file", .path(\.replication.nkeySeedFile)),
            ("creds_file", .path(\.replication.credsFile)),
            ("tls", .natsTLS),
            ("replicas", .integer(1...5, \.replication.replicas)),
            // At least the stream's 2-minute duplicate window (JetStream refuses a shorter age).
            ("max_age_s", .integer(120...31_536_000, \.replication.maxAgeSeconds)),
            ("max_bytes", .integer64(1_048_576...(1 << 40), \.replication.maxBytes)),
            ("request_timeout_ms", .integer(100...60_000, \.replication.requestTimeoutMs)),
            ("consumer_heartbeat_ms", .integer(250...5_000, \.replication.consumerHeartbeatMs)),
            ("ack_timeout_ms", .integer(100...5_000, \.replication.ackTimeoutMs)),
            ("write_deadline_ms", .integer(1_000...60_000, \.replication.writeDeadlineMs)),
            ("ping_interval_ms", .integer(500...60_000, \.replication.pingIntervalMs)),
            ("snapshot_publish_interval_s", .integer(1...86_400, \.replication.snapshotPublishIntervalSeconds)),
            ("max_snapshot_bytes", .integer(1_048_576...(1 << 34), \.replication.maxSnapshotBytes)),
        ]),
        ("log", [
            ("level", .choice(["trace", "debug", "info", "notice", "warning", "error", "critical"], \.logLevel)),
            ("summary_interval_s", .integer(0...86_400, \.summaryIntervalSeconds)),
        ]),
    ]

    /// Parses YAML text; throws `ConfigError` listing every invalid value.
    public static func load(yaml text: String, base: ServerConfig = ServerConfig()) throws -> ServerConfig {
        var config = base
        var issues: [ConfigIssue] = []
        let root: Node?
        do {
            root = try Yams.compose(yaml: text)
        } catch {
            throw ConfigError(issues: [ConfigIssue(key: "(file)", message: "not valid YAML: \(error)")])
        }
        guard let root else { return config }  // an empty file: all defaults
        guard let top = root.mapping else {
            throw ConfigError(issues: [ConfigIssue(key: "(file)", message: "the top level must be a mapping of sections", line: line(root))])
        }
        for (sectionNode, body) in top {
            let sectionName = sectionNode.scalar?.string ?? "?"
            guard let section = schema.first(where: { $0.section == sectionName }) else {
                let known = schema.map(\.section).joined(separator: ", ")
                issues.append(ConfigIssue(key: sectionName, message: "unknown section (known: \(known))", line: line(sectionNode)))
                continue
            }
            // `cluster:` turns clustering on, even empty (then its required keys are reported missing).
            if sectionName == "cluster" { config.replication.enabled = true }
            if case .scalar(let s) = body, s.string.isEmpty || s.string == "~" || s.string == "null" { continue }
            guard let entries = body.mapping else {
                issues.append(ConfigIssue(key: sectionName, message: "must be a mapping of keys", line: line(body)))
                continue
            }
            for (keyNode, valueNode) in entries {
                let key = keyNode.scalar?.string ?? "?"
                let name = "\(sectionName).\(key)"
                guard let (_, kind) = section.keys.first(where: { $0.0 == key }) else {
                    let known = section.keys.map(\.0).joined(separator: ", ")
                    issues.append(ConfigIssue(key: name, message: "unknown key (known in \(sectionName): \(known))", line: line(keyNode)))
                    continue
                }
                if case .natsTLS = kind {
                    issues.append(contentsOf: applyNATSTLS(valueNode, to: &config))
                    continue
                }
                if let message = apply(kind, valueNode, to: &config) {
                    issues.append(ConfigIssue(key: name, message: message, line: line(valueNode)))
                }
            }
        }
        issues.append(contentsOf: crossCheck(config))
        // A key already refused for its value is not also reported missing.
        issues.append(contentsOf: crossCheckReplication(config.replication).filter { rule in !issues.contains { $0.key == rule.key } })
        // The credential and TLS files are read now, so that --check-config and `cluster check`
        // report a missing, unreadable, world-readable or malformed file before a node starts.
        if config.replication.enabled && !issues.contains(where: { $0.key.hasPrefix("cluster.") }) {
            issues.append(contentsOf: loadReplicationFiles(&config.replication))
        }
        // Likewise the VAPID key and the relay's secret (`PushConfig.load`).
        let pushIssues = config.push.issues().filter { rule in !issues.contains { $0.key == rule.key } }
        issues.append(contentsOf: pushIssues)
        if !issues.contains(where: { $0.key.hasPrefix("push.") }) {
            issues.append(contentsOf: config.push.load())
        }
        if !issues.isEmpty { throw ConfigError(issues: issues) }
        return config
    }

    /// Applies one value; returns a message when it is invalid.
    static func apply(_ kind: Kind, _ node: Node, to config: inout ServerConfig) -> String? {
        if case .prefixes(let path) = kind {
            guard let items = node.sequence else { return "must be a list of IP addresses or prefixes" }
            var prefixes: [String] = []
            for item in items {
                guard let text = item.scalar?.string, AddressPrefix(parsing: text) != nil else {
                    return "each entry must be an IP address or prefix such as 10.0.0.0/8 or ::1, got \"\(item.scalar?.string ?? "?")\""
                }
                prefixes.append(text)
            }
            guard prefixes.count <= 1_000 else { return "lists at most 1000 prefixes" }
            config[keyPath: path] = prefixes
            return nil
        }
        if case .names(let count, let path) = kind {
            guard let items = node.sequence else { return "must be a list of names" }
            var names: [String] = []
            for item in items {
                guard let name = item.scalar?.string, isName(name) else {
                    return "each entry must be a name of 1 to 32 characters a-z, 0-9, '_' or '-'"
                }
                guard !names.contains(name) else { return "lists \"\(name)\" twice" }
                names.append(name)
            }
            guard count.contains(names.count) else { return "must list \(count.lowerBound) to \(count.upperBound) names, got \(names.count)" }
            config[keyPath: path] = names
            return nil
        }
        if case .natsURLs(let path) = kind {
            return applyNATSURLs(node, to: &config, path)
        }
        if case .coordinate(let latitude, let longitude) = kind {
            return applyCoordinate(node, to: &config, latitude, longitude)
        }
        if case .escalation(let path) = kind { return applyEscalation(node, to: &config, path) }
        if case .unsupported(let reason) = kind { return reason }
        guard let scalar = node.scalar else { return "must be a single value, not a list or mapping" }
        let text = scalar.string
        switch kind {
        case .integer(let range, let path):
            let digits = String(text.filter { $0 != "_" })
            guard let value = Int(digits) else { return "must be an integer, got \"\(text)\"" }
            guard range.contains(value) else { return "must be between \(range.lowerBound) and \(range.upperBound), got \(value)" }
            config[keyPath: path] = value
        case .boolean(let path):
            switch text.lowercased() {
            case "true", "yes", "on": config[keyPath: path] = true
            case "false", "no", "off": config[keyPath: path] = false
            default: return "must be true or false, got \"\(text)\""
            }
        case .address(let path):
            guard let address = ListenAddress(parsing: text) else {
                return "must be HOST:PORT with a numeric IPv4 address or a bracketed IPv6 one (e.g. 127.0.0.1:8080, [::]:8080), got \"\(text)\""
            }
            config[keyPath: path] = address
        case .optionalAddress(let path):
            if text.isEmpty || text == "off" {
                config[keyPath: path] = nil
                return nil
            }
            guard let address = ListenAddress(parsing: text) else {
                return "must be HOST:PORT with a numeric IPv4 address or a bracketed IPv6 one (e.g. 127.0.0.1:8080, [::]:8443), or off, got \"\(text)\""
            }
            config[keyPath: path] = address
        case .text(let path):
            guard text.utf8.count <= 4096, !text.utf8.contains(0) else { return "must be text of at most 4096 bytes" }
            config[keyPath: path] = text
        case .choice(let options, let path):
            guard options.contains(text) else { return "must be one of \(options.joined(separator: ", ")), got \"\(text)\"" }
            config[keyPath: path] = text
        case .integer64(let range, let path):
            let digits = String(text.filter { $0 != "_" })
            guard let value = Int64(digits) else { return "must be an integer, got \"\(text)\"" }
            guard range.contains(value) else { return "must be between \(range.lowerBound) and \(range.upperBound), got \(value)" }
            config[keyPath: path] = value
        case .path(let path):
            guard text.utf8.count <= 4096, !text.utf8.contains(0) else { return "must be a file system path of at most 4096 bytes" }
            config[keyPath: path] = text
        case .name(let path):
            guard isName(text) else { return "must be 1 to 32 characters a-z, 0-9, '_' or '-', got \"\(text.prefix(40))\"" }
            config[keyPath: path] = text
        case .replicationName(let path):
            guard ReplicationSettings.isReplicationName(text) else {
                return "must be 1 to 32 characters A-Z, a-z, 0-9, '_' or '-' (it names the JetStream stream and leads its subjects)"
            }
            config[keyPath: path] = text
        case .names, .prefixes, .natsURLs, .natsTLS, .coordinate, .escalation, .unsupported:
            break  // handled above
        }
        return nil
    }

    /// `[latitude, longitude]`: a list of two finite numbers, in -90...90 and -180...180.
    static func applyCoordinate(_ node: Node, to config: inout ServerConfig, _ latitude: Path<Double>, _ longitude: Path<Double>) -> String? {
        let form = "must be [latitude, longitude] in degrees, such as [52.52, 13.405]"
        let shown = { (node: Node) in node.scalar.map { "\"\($0.string.prefix(24))\"" } ?? "a list or mapping" }
        guard let items = node.sequence else { return "\(form), got \(shown(node))" }
        guard items.count == 2 else { return "\(form): two numbers, got \(items.count)" }
        guard let lat = items[0].scalar.flatMap({ Double($0.string) }), let lon = items[1].scalar.flatMap({ Double($0.string) }),
              lat.isFinite, lon.isFinite else {
            return "\(form): two numbers, got [\(items.map(shown).joined(separator: ", "))]"
        }
        guard (-90...90).contains(lat) else { return "the latitude must be between -90 and 90, got \(lat)" }
        guard (-180...180).contains(lon) else { return "the longitude must be between -180 and 180, got \(lon)" }
        config[keyPath: latitude] = lat
        config[keyPath: longitude] = lon
        return nil
    }

    static func isName(_ s: String) -> Bool {
        !s.isEmpty && s.utf8.count <= 32 && s.utf8.allSatisfy { ($0 >= 97 && $0 <= 122) || ($0 >= 48 && $0 <= 57) || $0 == 95 || $0 == 45 }
    }

    /// Rules between keys.
    static func crossCheck(_ c: ServerConfig) -> [ConfigIssue] {
        var issues: [ConfigIssue] = []
        let p = c.pins
        if !(p.minTTLSeconds <= p.defaultTTLSeconds && p.defaultTTLSeconds <= p.maxTTLSeconds) {
            issues.append(ConfigIssue(key: "pins.default_ttl_s", message: "must lie between pins.min_ttl_s (\(p.minTTLSeconds)) and pins.max_ttl_s (\(p.maxTTLSeconds))"))
        }
        if c.panic.maxWatchersOnStart > c.panic.maxWatchTokens {
            issues.append(ConfigIssue(key: "panic.max_watchers_on_start", message: "must not exceed panic.max_watch_tokens (\(c.panic.maxWatchTokens))"))
        }
        if c.panic.maxTimerMs >= c.panic.abandonAfterMs {
            issues.append(ConfigIssue(key: "panic.max_timer_s", message: "must be shorter than panic.abandon_after_ms (\(c.panic.abandonAfterMs) ms): a timer comes due before its stream can be abandoned"))
        }
        if c.checkin.maxHomeMs >= c.checkin.idleLifetimeMs {
            issues.append(ConfigIssue(key: "checkin.max_home_s", message: "must be shorter than checkin.idle_lifetime_s (\(c.checkin.idleLifetimeMs / 1000)): home safe lapses before its circle can be idle"))
        }
        if !p.categories.contains("general") {
            issues.append(ConfigIssue(key: "pins.categories", message: "must include \"general\", the category of pins created without one"))
        }
        if p.cellPrecisionMin > p.cellPrecisionMax {
            issues.append(ConfigIssue(key: "pins.cell_precision_min", message: "must not exceed pins.cell_precision_max (\(p.cellPrecisionMax))"))
        }
        if p.clusterPrecisionMin > p.clusterPrecisionMax {
            issues.append(ConfigIssue(key: "pins.cluster_precision_min", message: "must not exceed pins.cluster_precision_max (\(p.clusterPrecisionMax))"))
        }
        if p.clusterPrecisionMin == 2 && p.clusterCellBudget < 1_024 {
            issues.append(ConfigIssue(key: "pins.cluster_cell_budget", message: "must be at least 1024 when pins.cluster_precision_min is 2: the whole world is 1,024 cells of precision 2"))
        }
        if c.listen == nil && c.tlsListen == nil {
            issues.append(ConfigIssue(key: "server.listen", message: "is off and tls.listen is not set: vigild would accept no connections"))
        }
        if let admin = c.adminListen, admin.port != 0, admin == c.listen || admin == c.tlsListen {
            issues.append(ConfigIssue(key: "admin.listen", message: "must differ from server.listen and tls.listen (\(admin))"))
        }
        if c.tlsListen != nil && (c.tlsCertificate.isEmpty || c.tlsPrivateKey.isEmpty) {
            issues.append(ConfigIssue(key: "tls.listen", message: "needs tls.certificate and tls.private_key (PEM files)"))
        }
        if !c.webTileURL.isEmpty && ServerConfig.tileSource(c.webTileURL) == nil {
            issues.append(ConfigIssue(key: "web.tile_url", message: "must be empty or an http(s) URL with {z}, {x} and {y} (and {s} only as the host's first label), without spaces, quotes, commas or semicolons"))
        }
        if c.webEnabled && c.webRoot.isEmpty {
            issues.append(ConfigIssue(key: "web.root", message: "must name the pages' folder when web.enabled is true"))
        }
        if c.maxOutputBufferBytes < c.maxMessageBytes {
            issues.append(ConfigIssue(key: "websocket.max_output_buffer_bytes", message: "must be at least websocket.max_message_bytes (\(c.maxMessageBytes))"))
        }
        return issues
    }

    static func line(_ node: Node) -> Int? {
        node.mark.map { $0.line }
    }
}

extension ConfigLoader {
    /// `push.escalation`: each step a mapping with `after_s` (1 to 30 days, in seconds) and
    /// `channels` (a non-empty list of webpush and relay), at most `maxEscalationSteps`.
    static func applyEscalation(_ node: Node, to config: inout ServerConfig, _ path: Path<[PushConfig.EscalationStep]>) -> String? {
        let shape = "must be a list of steps {after_s: SECONDS, channels: [webpush, relay]}"
        guard let items = node.sequence else { return shape }
        guard items.count <= PushConfig.maxEscalationSteps else { return "lists at most \(PushConfig.maxEscalationSteps) steps" }
        var steps: [PushConfig.EscalationStep] = []
        for (i, item) in items.enumerated() {
            guard let mapping = item.mapping else { return shape }
            var after: Int?
            var channels: [String]?
            for (key, value) in mapping {
                switch key.scalar?.string {
                case "after_s":
                    guard let n = value.scalar.flatMap({ Int($0.string) }), (1...2_592_000).contains(n) else {
                        return "step \(i + 1): after_s must be whole seconds from 1 to 2592000"
                    }
                    after = n
                case "channels":
                    guard let list = value.sequence?.compactMap({ $0.scalar?.string }), list.count == value.sequence?.count,
                          !list.isEmpty, Set(list).count == list.count, list.allSatisfy(PushConfig.channelNames.contains)
                    else { return "step \(i + 1): channels must list webpush, relay or both, once each" }
                    channels = list
                default:
                    return "step \(i + 1): unknown key \"\(key.scalar?.string ?? "?")\" (after_s and channels)"
                }
            }
            guard let after, let channels else { return "step \(i + 1): needs after_s and channels" }
            steps.append(PushConfig.EscalationStep(afterSeconds: after, channels: channels))
        }
        config[keyPath: path] = steps
        return nil
    }
}
