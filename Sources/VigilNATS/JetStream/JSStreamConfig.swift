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
}

/// What STREAM.INFO and STREAM.CREATE answer that Vigil uses: the stream's configured subjects
/// and replicas, and its state (sequence range, size).
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
                leader: String((object["cluster"]?.object?["leader"]?.string ?? "").prefix(64))))
        }
    }
}
