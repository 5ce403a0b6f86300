import VigilCore

/// The layout of a JetStream object store (ADR-20), so that the standard tooling (`nats object`,
/// the official clients) reads what Vigil writes and the other way round:
/// - bucket `B` is the stream `OBJ_B` over `$O.B.C.>` (chunks) and `$O.B.M.>` (metas);
/// - an object is its chunks, each one message on `$O.B.C.<nuid>` (a fresh random id per put,
///   so a new version never mixes with the old one's chunks), followed by one meta message on
///   `$O.B.M.<padded base64url of the name>` carrying `Nats-Rollup: sub`, which makes JetStream
///   keep only the newest meta per name;
/// - the meta is JSON (`JSObjectInfo`) with the size, chunk count and `SHA-256=<base64url>`
///   digest of the whole object.
public enum JSObjectStore {
    /// ADR-20's default chunk size.
    public static let defaultChunkSize = 128 * 1024
    /// The header that makes a meta message replace the earlier ones on its subject.
    public static let rollupHeader = (name: "Nats-Rollup", value: "sub")

    /// A bucket name: 1 to 64 of A-Z, a-z, 0-9, '-', '_' (ADR-6's restricted term, bounded here).
    public static func isBucketName(_ name: String) -> Bool {
        !name.isEmpty && name.utf8.count <= 64 && name.utf8.allSatisfy {
            ($0 >= 65 && $0 <= 90) || ($0 >= 97 && $0 <= 122) || ($0 >= 48 && $0 <= 57) || $0 == 95 || $0 == 45
        }
    }

    public static func streamName(bucket: String) -> String { "OBJ_\(bucket)" }
    public static func chunkSubject(bucket: String, nuid: String) -> String { "$O.\(bucket).C.\(nuid)" }
    public static func metaSubject(bucket: String, name: String) -> String { "$O.\(bucket).M.\(encodeName(name))" }
    public static func subjects(bucket: String) -> [String] { ["$O.\(bucket).C.>", "$O.\(bucket).M.>"] }

    /// An object's name as it appears in its meta subject: padded base64url of its UTF-8 (as Go's
    /// `base64.URLEncoding` writes it; the '=' is allowed in a subject token).
    public static func encodeName(_ name: String) -> String {
        NATSBase64.encode(Array(name.utf8), alphabet: .url)
    }

    /// An object id: 22 characters of base-62, like a NUID, from the caller's random source.
    public static func makeNUID(using random: inout some RandomNumberGenerator) -> String {
        NATSInbox.token(length: 22, using: &random)
    }
}

/// The digest in an object's meta: `SHA-256=` and the 32 bytes in padded base64url.
public enum JSObjectDigest {
    public static let prefix = "SHA-256="

    public static func format(sha256: [UInt8]) -> String {
        prefix + NATSBase64.encode(sha256, alphabet: .url)
    }

    /// The 32 bytes of a `SHA-256=` digest (padded or not), nil for anything else (another
    /// algorithm, another length, not base64url).
    public static func parse(_ text: String) -> [UInt8]? {
        guard text.utf8.count <= 64, text.hasPrefix(prefix) else { return nil }
        guard let bytes = NATSBase64.decode(text.utf8.dropFirst(prefix.utf8.count), alphabet: .url), bytes.count == 32 else {
            return nil
        }
        return bytes
    }
}

/// The stream behind an object store bucket, as ADR-20 and the official clients create it:
/// limits retention, `discard: new` (a full bucket refuses the new object instead of evicting
/// the chunks of the current one), rollup headers allowed (the meta's `Nats-Rollup: sub`),
/// direct gets allowed, no age limit unless `maxAgeSeconds` (an object store's TTL).
public struct JSObjectStoreConfig: Equatable, Sendable {
    public var bucket: String
    public var description: String
    public var replicas: Int
    /// The bucket's bound in bytes, all objects and their metas (-1: none).
    public var maxBytes: Int64
    public var maxAgeSeconds: Int64
    public var storage: JSStreamConfig.Storage

    public init(bucket: String, description: String = "", replicas: Int = 1, maxBytes: Int64 = -1,
                maxAgeSeconds: Int64 = 0, storage: JSStreamConfig.Storage = .file) {
        self.bucket = bucket
        self.description = description
        self.replicas = replicas
        self.maxBytes = maxBytes
        self.maxAgeSeconds = maxAgeSeconds
        self.storage = storage
    }

    public var streamName: String { JSObjectStore.streamName(bucket: bucket) }
    public var subjects: [String] { JSObjectStore.subjects(bucket: bucket) }

    /// The stream behind the bucket (its JSON is the body of `$JS.API.STREAM.CREATE.OBJ_<bucket>`).
    public var streamConfig: JSStreamConfig {
        var config = JSStreamConfig(name: streamName, subjects: subjects, storage: storage, replicas: replicas,
                                    maxAgeSeconds: maxAgeSeconds, maxBytes: maxBytes)
        config.description = description
        config.discardNew = true
        config.allowRollup = true
        config.allowDirect = true
        return config
    }

    public func encode() -> [UInt8] { streamConfig.encode() }

    /// Why the stream a STREAM.INFO reply describes cannot serve as this bucket, nil when it can:
    /// other subjects (another application's stream, never taken over), or without the rollup
    /// headers or direct gets the object store needs (the official clients set both). Its
    /// replicas, size and age bounds are the operator's to change and are not checked.
    public func problem(existing payload: [UInt8]) -> String? {
        guard case .success(let object) = JSAPI.object(payload), let config = object["config"]?.object else {
            return "stream info without a config"
        }
        let subjects = (config["subjects"]?.array ?? []).compactMap(\.string)
        if Set(subjects) != Set(self.subjects) {
            return "stream \(streamName) exists with subjects \(subjects.prefix(8)), not \(self.subjects)"
        }
        if config["allow_rollup_hdrs"]?.bool != true { return "stream \(streamName) exists without allow_rollup_hdrs" }
        if config["allow_direct"]?.bool != true { return "stream \(streamName) exists without allow_direct" }
        return nil
    }
}

/// An object's meta (ADR-20's ObjectInfo), the JSON payload of its meta message. `mtime` is not
/// stored (ADR-20): the meta message's JetStream timestamp is the object's time.
public struct JSObjectInfo: Equatable, Sendable {
    public var name: String
    public var description = ""
    /// `headers`: each name with its values, as Go's `http.Header` writes them.
    public var headers: [String: [String]] = [:]
    /// `metadata`: string keys to string values (`nats object info` lists them).
    public var metadata: [String: String] = [:]
    public var bucket: String
    public var nuid: String
    public var size: UInt64
    public var chunks: Int
    public var digest: String
    public var deleted = false
    /// `options.max_chunk_size`: the chunk size the writer used (0: not given).
    public var maxChunkSize = 0

    public init(name: String, bucket: String, nuid: String, size: UInt64, chunks: Int, digest: String,
                metadata: [String: String] = [:], maxChunkSize: Int = 0) {
        self.name = name
        self.bucket = bucket
        self.nuid = nuid
        self.size = size
        self.chunks = chunks
        self.digest = digest
        self.metadata = metadata
        self.maxChunkSize = maxChunkSize
    }

    /// Bounds on a meta read from the stream: everything in it comes from whoever can publish
    /// to the bucket's subjects, so nothing is trusted beyond these.
    public static let maxEncodedBytes = 64 * 1024
    public static let maxNameBytes = 1024
    public static let maxEntries = 64
    public static let maxKeyBytes = 256
    public static let maxValueBytes = 4096

    public func encode() -> [UInt8] {
        var json = JSONWriter(capacity: 512)
        json.beginObject()
        json.field("name", name)
        if !description.isEmpty { json.field("description", description) }
        if !headers.isEmpty {
            json.key("headers")
            json.beginObject()
            for key in headers.keys.sorted() {
                json.key(key)
                json.beginArray()
                for value in headers[key]! { json.string(value) }
                json.endArray()
            }
            json.endObject()
        }
        if !metadata.isEmpty {
            json.key("metadata")
            json.beginObject()
            for key in metadata.keys.sorted() {
                json.key(key)
                json.string(metadata[key]!)
            }
            json.endObject()
        }
        if maxChunkSize > 0 {
            json.key("options")
            json.beginObject()
            json.field("max_chunk_size", Int64(maxChunkSize))
            json.endObject()
        }
        json.field("bucket", bucket)
        json.field("nuid", nuid)
        json.field("size", Int64(clamping: size))
        json.field("chunks", Int64(chunks))
        if !digest.isEmpty { json.field("digest", digest) }
        if deleted { json.field("deleted", true) }
        json.endObject()
        return json.bytes
    }

    /// Reads a meta; refuses (with what was wrong) one that is too large, not JSON, misses a field,
    /// breaks a bound, or whose numbers do not fit together (chunks without bytes, more chunks
    /// than bytes). A deleted object's meta may have no digest; any other needs a SHA-256 one.
    public static func decode(_ payload: [UInt8]) -> Result<JSObjectInfo, JSAPIError> {
        func refuse(_ why: String) -> Result<JSObjectInfo, JSAPIError> {
            .failure(JSAPIError(code: 0, errorCode: 0, description: "object meta: \(why)"))
        }
        guard payload.count <= maxEncodedBytes else { return refuse("longer than \(maxEncodedBytes) bytes") }
        guard let value = try? JSONParser.parse(payload, maxDepth: 8), let object = value.object else {
            return refuse("not a JSON object")
        }
        guard let name = object["name"]?.string, !name.isEmpty, name.utf8.count <= maxNameBytes else {
            return refuse("no name, or a name over \(maxNameBytes) bytes")
        }
        guard let bucket = object["bucket"]?.string, JSObjectStore.isBucketName(bucket) else { return refuse("no valid bucket") }
        guard let nuid = object["nuid"]?.string, nuid.utf8.count <= 64, NATSSubject.isToken(nuid),
              !nuid.contains("*"), !nuid.contains(">") else {
            return refuse("no valid nuid")
        }
        guard let size = object["size"]?.int64, size >= 0 else { return refuse("no valid size") }
        guard let chunks = object["chunks"]?.int64, chunks >= 0, chunks <= Int64(UInt32.max) else {
            return refuse("no valid chunk count")
        }
        let deleted = object["deleted"]?.bool ?? false
        let digest = object["digest"]?.string ?? ""
        if !deleted {
            guard JSObjectDigest.parse(digest) != nil else { return refuse("no SHA-256 digest") }
            guard (size == 0) == (chunks == 0), chunks <= size else { return refuse("\(chunks) chunks for \(size) bytes") }
        }
        var info = JSObjectInfo(name: name, bucket: bucket, nuid: nuid, size: UInt64(size), chunks: Int(chunks), digest: digest)
        info.deleted = deleted
        if let description = object["description"] {
            guard let text = description.string, text.utf8.count <= maxValueBytes else { return refuse("description is not a bounded string") }
            info.description = text
        }
        if let metadata = object["metadata"], !metadata.isNull {
            guard let members = metadata.object?.members, members.count <= maxEntries else { return refuse("metadata is not a bounded object") }
            for (key, value) in members {
                guard key.utf8.count <= maxKeyBytes, let text = value.string, text.utf8.count <= maxValueBytes else {
                    return refuse("metadata entry is not a bounded string")
                }
                info.metadata[key] = text
            }
        }
        if let headers = object["headers"], !headers.isNull {
            guard let members = headers.object?.members, members.count <= maxEntries else { return refuse("headers is not a bounded object") }
            for (key, value) in members {
                guard key.utf8.count <= maxKeyBytes, let values = value.array, values.count <= maxEntries else {
                    return refuse("header is not a bounded list")
                }
                var texts: [String] = []
                for v in values {
                    guard let text = v.string, text.utf8.count <= maxValueBytes else { return refuse("header value is not a bounded string") }
                    texts.append(text)
                }
                info.headers[key] = texts
            }
        }
        if let chunkSize = object["options"]?.object?["max_chunk_size"] {
            guard let n = chunkSize.int64, n >= 0, n <= Int64(UInt32.max) else { return refuse("options.max_chunk_size is not a size") }
            info.maxChunkSize = Int(n)
        }
        return .success(info)
    }
}

/// A message read back with `$JS.API.STREAM.MSG.GET.<stream>`: its subject, sequence, headers
/// and body (which the reply carries as standard base64), and its stored time as written.
public struct JSStoredMessage: Equatable, Sendable {
    public var subject: String
    public var sequence: UInt64
    public var headers: NATSHeaders?
    public var data: [UInt8]
    /// RFC 3339, as the server wrote it (not parsed: only shown).
    public var time: String

    public init(subject: String, sequence: UInt64, headers: NATSHeaders? = nil, data: [UInt8], time: String = "") {
        self.subject = subject
        self.sequence = sequence
        self.headers = headers
        self.data = data
        self.time = time
    }

    /// The request body that asks for the last message on `subject`.
    public static func lastBySubjectRequest(_ subject: String) -> [UInt8] {
        var json = JSONWriter(capacity: 96)
        json.beginObject()
        json.field("last_by_subj", subject)
        json.endObject()
        return json.bytes
    }

    /// Reads the reply; an API error (`no message found` is `JSAPI.noMessageFound`) stays one.
    public static func decode(_ payload: [UInt8]) -> Result<JSStoredMessage, JSAPIError> {
        func refuse(_ why: String) -> Result<JSStoredMessage, JSAPIError> {
            .failure(JSAPIError(code: 0, errorCode: 0, description: "stored message: \(why)"))
        }
        switch JSAPI.object(payload) {
        case .failure(let error):
            return .failure(error)
        case .success(let object):
            guard let message = object["message"]?.object, let subject = message["subject"]?.string,
                  NATSSubject.problem(subject, wildcards: false) == nil,
                  let sequence = JSAPI.sequence(message["seq"]), sequence > 0 else {
                return refuse("no subject or sequence")
            }
            var headers: NATSHeaders?
            if let encoded = message["hdrs"]?.string, !encoded.isEmpty {
                guard let block = NATSBase64.decode(encoded.utf8, alphabet: .standard),
                      let decoded = try? NATSHeaders.decode(block[...]) else {
                    return refuse("headers are not a base64 NATS header block")
                }
                headers = decoded
            }
            var data: [UInt8] = []
            if let encoded = message["data"]?.string {
                guard let bytes = NATSBase64.decode(encoded.utf8, alphabet: .standard) else { return refuse("data is not base64") }
                data = bytes
            }
            return .success(JSStoredMessage(subject: subject, sequence: sequence, headers: headers, data: data,
                                            time: String((message["time"]?.string ?? "").prefix(64))))
        }
    }
}

/// `$JS.API.DIRECT.GET.<stream>` (a stream with `allow_direct`): one stored message as it was
/// published, body and headers untouched, with the server's `Nats-Sequence` and `Nats-Subject`
/// headers added; a `404` status when there is none. An object's chunks are read this way, one
/// at a time (`next_by_subj` from the sequence after the last one), so at most one chunk is ever
/// in flight ahead of the connection's other traffic.
public enum JSDirectGet {
    public enum Reply: Equatable, Sendable {
        case message(subject: String, sequence: UInt64, data: [UInt8])
        /// No message on the subject at or after the sequence asked for.
        case notFound
    }

    /// The request body for the first message on `subject` at or after `sequence`.
    public static func request(nextBySubject subject: String, from sequence: UInt64) -> [UInt8] {
        var json = JSONWriter(capacity: 96)
        json.beginObject()
        json.field("seq", Int64(clamping: sequence))
        json.field("next_by_subj", subject)
        json.endObject()
        return json.bytes
    }

    /// Reads the reply message: the stored message, `notFound` (status 404), or what was wrong.
    public static func decode(_ message: NATSMessage) -> Result<Reply, JSAPIError> {
        func refuse(_ why: String) -> Result<Reply, JSAPIError> {
            .failure(JSAPIError(code: 0, errorCode: 0, description: "direct get: \(why)"))
        }
        if let status = message.status {
            if status == 404 { return .success(.notFound) }
            return .failure(JSAPIError(code: status, errorCode: 0,
                                       description: "status \(status) \(String((message.headers?.statusDescription ?? "").prefix(100)))"))
        }
        guard let headers = message.headers, let subject = headers["Nats-Subject"],
              NATSSubject.problem(subject, wildcards: false) == nil,
              let sequence = headers["Nats-Sequence"].flatMap({ NATSParser.number(ArraySlice($0.utf8), maxDigits: 20) }), sequence > 0 else {
            return refuse("reply without Nats-Subject and Nats-Sequence headers")
        }
        return .success(.message(subject: subject, sequence: sequence, data: message.payload))
    }
}

/// The reply to `$JS.API.STREAM.PURGE.<stream>`: how many messages went.
public enum JSPurge {
    /// The body that purges every message on `subject` (an object's chunks).
    public static func request(filter subject: String) -> [UInt8] {
        var json = JSONWriter(capacity: 96)
        json.beginObject()
        json.field("filter", subject)
        json.endObject()
        return json.bytes
    }

    public static func decodePurged(_ payload: [UInt8]) -> Result<UInt64, JSAPIError> {
        switch JSAPI.object(payload) {
        case .failure(let error):
            return .failure(error)
        case .success(let object):
            guard object["success"]?.bool == true else {
                return .failure(JSAPIError(code: 0, errorCode: 0, description: "purge reply without success"))
            }
            return .success(JSAPI.sequence(object["purged"]) ?? 0)
        }
    }
}

extension JSAPI {
    public static func streamMessageGet(_ stream: String) -> String { "$JS.API.STREAM.MSG.GET.\(stream)" }
    public static func streamPurge(_ stream: String) -> String { "$JS.API.STREAM.PURGE.\(stream)" }
    public static func directGet(_ stream: String) -> String { "$JS.API.DIRECT.GET.\(stream)" }
    /// Error code of `no message found` (`err_code` 10037): a MSG.GET for a subject with none.
    public static let noMessageFound = 10037
}
