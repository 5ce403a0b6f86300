import VigilCore

/// The stream a Vigil cluster writes to: every subject under `<name>.>`, limits retention,
/// file storage, replicated `replicas` times, bounded in age and size (old records go first:
/// snapshots make them unnecessary), with a de-duplication window for `Nats-Msg-Id`.
public struct JSStreamConfig: Equatable, Sendable {
    public enum Storage: String, Sendable { case file, memory }

    public var name: String
    public var subjects: [String]
    public var storage: Storage
    public var replicas: Int
    public var maxAgeSeconds: Int64
    public var maxBytes: Int64
    public var duplicateWindowSeconds: Int64
    /// What the other kinds of stream (an object store's) set differently: a description,
    /// `discard: new` (a full stream refuses new messages instead of dropping old ones), rollup
    /// headers (`Nats-Rollup`) and direct gets allowed.
    public var description = ""
    public var discardNew = false
    public var allowRollup = false
    public var allowDirect = false

    public init(name: String, subjects: [String], storage: Storage = .file, replicas: Int = 1,
                maxAgeSeconds: Int64, maxBytes: Int64, duplicateWindowSeconds: Int64 = 120) {
        self.name = name
        self.subjects = subjects
        self.storage = storage
        self.replicas = replicas
        self.maxAgeSeconds = maxAgeSeconds
        self.maxBytes = maxBytes
        self.duplicateWindowSeconds = duplicateWindowSeconds
    }

    /// The body of `$JS.API.STREAM.CREATE.<name>` (durations in nanoseconds, as the API wants).
    public func encode() -> [UInt8] {
        var json = JSONWriter(capacity: 256)
        json.beginObject()
        json.field("name", name)
        if !description.isEmpty { json.field("description", description) }
        json.key("subjects")
        json.beginArray()
        for subject in subjects { json.string(subject) }
        json.endArray()
        json.field("retention", "limits")
        json.field("storage", storage.rawValue)
        json.field("num_replicas", Int64(replicas))
        json.field("max_age", maxAgeSeconds * 1_000_000_000)
        json.field("max_bytes", maxBytes)
        json.field("discard", discardNew ? "new" : "old")
        json.field("duplicate_window", duplicateWindowSeconds * 1_000_000_000)
        if allowRollup { json.field("allow_rollup_hdrs", true) }
        if allowDirect { json.field("allow_direct", true) }
        json.endObject()
        return json.bytes
    }

    /// The settings vigild relies on, as this config asks for them.
    public var settings: JSStreamSettings {
        JSStreamSettings(subjects: subjects, retention: "limits", storage: storage.rawValue, replicas: replicas,
                         maxAgeNanoseconds: maxAgeSeconds * 1_000_000_000, maxBytes: maxBytes, discard: discardNew ? "new" : "old",
                         duplicateWindowNanoseconds: duplicateWindowSeconds * 1_000_000_000)
    }

    /// Where the existing stream differs from this config, in the order of `JSStreamSettings.keys`:
    /// empty when the stream is as configured.
    public func differences(from stream: JSStreamInfo) -> [JSStreamDifference] {
        settings.differences(stream: stream.settings)
    }
}

/// One value of a stream setting, as reported (durations in whole seconds).
public enum JSStreamSettingValue: Equatable, Sendable, CustomStringConvertible {
    case number(Int64)
    case text(String)
    case list([String])

    public func write(into w: inout JSONWriter) {
        switch self {
        case .number(let n): w.int(n)
        case .text(let s): w.string(s)
        case .list(let items):
            w.beginArray()
            for item in items { w.string(item) }
            w.endArray()
        }
    }

    public var description: String {
        switch self {
        case .number(let n): return String(n)
        case .text(let s): return s
        case .list(let items): return items.joined(separator: ",")
        }
    }
}

/// Every stream setting vigild relies on: what the config asks for, or what an existing stream has.
public struct JSStreamSettings: Equatable, Sendable {
    public var subjects: [String]
    public var retention: String
    public var storage: String
    public var replicas: Int
    public var maxAgeNanoseconds: Int64
    public var maxBytes: Int64
    public var discard: String
    public var duplicateWindowNanoseconds: Int64

    public init(subjects: [String], retention: String, storage: String, replicas: Int, maxAgeNanoseconds: Int64,
                maxBytes: Int64, discard: String, duplicateWindowNanoseconds: Int64) {
        self.subjects = subjects
        self.retention = retention
        self.storage = storage
        self.replicas = replicas
        self.maxAgeNanoseconds = maxAgeNanoseconds
        self.maxBytes = maxBytes
        self.discard = discard
        self.duplicateWindowNanoseconds = duplicateWindowNanoseconds
    }

    /// The names the settings are reported under (JetStream's, `replicas` for `num_replicas`;
    /// `max_age` and `duplicate_window` in seconds).
    public static let keys = ["subjects", "retention", "storage", "replicas", "max_age", "max_bytes", "discard", "duplicate_window"]

    /// Each setting under its key, in the order of `keys`.
    public var values: [(key: String, value: JSStreamSettingValue)] {
        [("subjects", .list(subjects)), ("retention", .text(retention)), ("storage", .text(storage)),
         ("replicas", .number(Int64(replicas))), ("max_age", .number(maxAgeNanoseconds / 1_000_000_000)),
         ("max_bytes", .number(maxBytes)), ("discard", .text(discard)),
         ("duplicate_window", .number(duplicateWindowNanoseconds / 1_000_000_000))]
    }

    /// The settings as one JSON object, `{"subjects":[…],"retention":"limits",…}`.
    public func write(into w: inout JSONWriter) {
        w.beginObject()
        for (key, value) in values {
            w.key(key)
            value.write(into: &w)
        }
        w.endObject()
    }

    /// Where `stream` differs from these settings (the config's). Subjects compare as sets,
    /// durations to the nanosecond.
    public func differences(stream: JSStreamSettings) -> [JSStreamDifference] {
        let same: [String: Bool] = [
            "subjects": Set(subjects) == Set(stream.subjects), "retention": retention == stream.retention,
            "storage": storage == stream.storage, "replicas": replicas == stream.replicas,
            "max_age": maxAgeNanoseconds == stream.maxAgeNanoseconds, "max_bytes": maxBytes == stream.maxBytes,
            "discard": discard == stream.discard, "duplicate_window": duplicateWindowNanoseconds == stream.duplicateWindowNanoseconds,
        ]
        let streamValues = stream.values
        var found: [JSStreamDifference] = []
        for (index, (key, value)) in values.enumerated() where same[key] != true {
            found.append(JSStreamDifference(key: key, config: value, stream: streamValues[index].value,
                                            updatable: JSStreamDifference.updatableKeys.contains(key),
                                            breaksCorrectness: Self.breaksCorrectness(key, config: self, stream: stream)))
        }
        return found
    }

    /// Whether a node can still apply and write correctly with the stream so: not with other
    /// subjects (another application's stream), another retention (messages would go before a
    /// snapshot covers them), another storage (memory loses the log with the servers), or a
    /// shorter de-duplication window (a retried publish could be stored twice).
    static func breaksCorrectness(_ key: String, config: JSStreamSettings, stream: JSStreamSettings) -> Bool {
        switch key {
        case "subjects", "retention", "storage": return true
        case "duplicate_window": return stream.duplicateWindowNanoseconds < config.duplicateWindowNanoseconds
        default: return false
        }
    }
}

/// A setting the existing stream has otherwise than the config asks.
public struct JSStreamDifference: Equatable, Sendable, CustomStringConvertible {
    /// The settings `$JS.API.STREAM.UPDATE` changes on an existing stream.
    public static let updatableKeys: Set<String> = ["replicas", "max_age", "max_bytes", "discard", "duplicate_window"]

    public var key: String
    public var config: JSStreamSettingValue
    public var stream: JSStreamSettingValue
    /// `vigild cluster check --update-stream` can change it.
    public var updatable: Bool
    /// The node refuses writes while it differs (see `JSStreamSettings.breaksCorrectness`).
    public var breaksCorrectness: Bool

    public init(key: String, config: JSStreamSettingValue, stream: JSStreamSettingValue, updatable: Bool, breaksCorrectness: Bool) {
        self.key = key
        self.config = config
        self.stream = stream
        self.updatable = updatable
        self.breaksCorrectness = breaksCorrectness
    }

    /// `{"key":"replicas","config":3,"stream":1,"updatable":true}`.
    public func write(into w: inout JSONWriter) {
        w.beginObject()
        w.key("key")
        w.string(key)
        w.key("config")
        config.write(into: &w)
        w.key("stream")
        stream.write(into: &w)
        w.key("updatable")
        w.bool(updatable)
        w.endObject()
    }

    /// `replicas: config 3, stream 1`.
    public var description: String { "\(key): config \(config), stream \(stream)" }
}

/// What STREAM.INFO, STREAM.CREATE and STREAM.UPDATE answer that Vigil uses: the stream's
/// settings (`settings`, compared with the config's by `JSStreamConfig.differences`), and its
/// state (sequence range, size).
public struct JSStreamInfo: Equatable, Sendable {
    public var name: String
    public var subjects: [String]
    public var replicas: Int
    public var messages: UInt64
    public var bytes: UInt64
    public var firstSequence: UInt64
    public var lastSequence: UInt64
    /// The server leading the stream's replicas (`cluster.leader`), empty outside a NATS cluster.
    public var leader = ""
    /// The rest of the settings vigild relies on (`settings`), as JetStream reports them.
    public var retention = "limits"
    public var storage = "file"
    public var maxAgeNanoseconds: Int64 = 0
    public var maxBytes: Int64 = -1
    public var discard = "old"
    public var duplicateWindowNanoseconds: Int64 = 0

    public var settings: JSStreamSettings {
        JSStreamSettings(subjects: subjects, retention: retention, storage: storage, replicas: replicas,
                         maxAgeNanoseconds: maxAgeNanoseconds, maxBytes: maxBytes, discard: discard,
                         duplicateWindowNanoseconds: duplicateWindowNanoseconds)
    }

    public static func decode(_ payload: [UInt8]) -> Result<JSStreamInfo, JSAPIError> {
        switch JSAPI.object(payload) {
        case .failure(let error):
            return .failure(error)
        case .success(let object):
            guard let config = object["config"]?.object, let name = config["name"]?.string,
                  let state = object["state"]?.object,
                  let first = JSAPI.sequence(state["first_seq"]), let last = JSAPI.sequence(state["last_seq"]) else {
                return .failure(JSAPIError(code: 0, errorCode: 0, description: "stream info without config or state"))
            }
            return .success(JSStreamInfo(
                name: name, subjects: (config["subjects"]?.array ?? []).compactMap(\.string),
                replicas: Int(config["num_replicas"]?.int64 ?? 1),
                messages: JSAPI.sequence(state["messages"]) ?? 0, bytes: JSAPI.sequence(state["bytes"]) ?? 0,
                firstSequence: first, lastSequence: last,
                leader: String((object["cluster"]?.object?["leader"]?.string ?? "").prefix(64)),
                retention: String((config["retention"]?.string ?? "limits").prefix(32)),
                storage: String((config["storage"]?.string ?? "file").prefix(32)),
                maxAgeNanoseconds: config["max_age"]?.int64 ?? 0, maxBytes: config["max_bytes"]?.int64 ?? -1,
                discard: String((config["discard"]?.string ?? "old").prefix(32)),
                duplicateWindowNanoseconds: config["duplicate_window"]?.int64 ?? 0))
        }
    }
}
