import VigilNATS

/// The JetStream calls a Vigil cluster makes, over a `NATSClient`: stream info and creation,
/// and publishing with an acknowledgement. Each is a request with a timeout whose completion
/// runs exactly once, later, on the loop thread.
public final class JetStream {
    public let client: NATSClient
    /// How long an API call or a publish waits for JetStream's answer.
    public var timeoutMs: Int64

    public init(client: NATSClient, timeoutMs: Int64 = 5_000) {
        self.client = client
        self.timeoutMs = timeoutMs
    }

    /// `$JS.API.STREAM.INFO.<name>`.
    public func streamInfo(_ name: String, timeoutMs: Int64? = nil,
                           completion: @escaping (Result<JSStreamInfo, JetStreamError>) -> Void) throws(NATSClientError) {
        try client.request(subject: JSAPI.streamInfo(name), payload: [], timeoutMs: timeoutMs ?? self.timeoutMs) { result in
            completion(Self.decode(result, JSStreamInfo.decode))
        }
    }

    /// The stream as configured: its info when it exists (its subjects must be the configured
    /// ones: another application's stream of the same name is refused, not taken over), created
    /// otherwise. Its other settings are the caller's to compare (`config.differences(from:)`).
    /// `infoTimeoutMs` (default `timeoutMs`) bounds the STREAM.INFO; the creation waits `timeoutMs`.
    public func ensureStream(_ config: JSStreamConfig, infoTimeoutMs: Int64? = nil,
                             completion: @escaping (Result<JSStreamInfo, JetStreamError>) -> Void) throws(NATSClientError) {
        try streamInfo(config.name, timeoutMs: infoTimeoutMs) { [weak self] result in
            switch result {
            case .success(let info):
                if Set(info.subjects) != Set(config.subjects) {
                    completion(.failure(.mismatch("stream \(config.name) exists with subjects \(info.subjects), not \(config.subjects)")))
                } else {
                    completion(.success(info))
                }
            case .failure(.api(let error)) where error.errorCode == JSAPI.streamNotFound:
                guard let self else { return completion(.failure(.client(.closed))) }
                do throws(NATSClientError) {
                    try self.client.request(subject: JSAPI.streamCreate(config.name), payload: config.encode(),
                                            timeoutMs: self.timeoutMs) { created in
                        completion(Self.decode(created, JSStreamInfo.decode))
                    }
                } catch {
                    completion(.failure(.client(error)))
                }
            case .failure(let error):
                completion(.failure(error))
            }
        }
    }

    /// `$JS.API.STREAM.UPDATE.<name>` with the whole of `config`: completes with the stream as
    /// it is afterwards, or JetStream's refusal (a setting it does not change, too few servers
    /// for the replicas). The caller sends it only for the settings that may change
    /// (`JSStreamDifference.updatable`): never done by a node on its own.
    public func updateStream(_ config: JSStreamConfig,
                             completion: @escaping (Result<JSStreamInfo, JetStreamError>) -> Void) throws(NATSClientError) {
        try client.request(subject: JSAPI.streamUpdate(config.name), payload: config.encode(), timeoutMs: timeoutMs) { result in
            completion(Self.decode(result, JSStreamInfo.decode))
        }
    }

    /// Publishes to a stream's subject and completes with JetStream's acknowledgement: the
    /// message is stored (on a quorum of the stream's replicas) at `sequence`. `messageID` goes
    /// in `Nats-Msg-Id`: publishing the same id again within the stream's duplicate window (a
    /// retry after a lost ack) stores nothing new and acknowledges the first copy (`duplicate`).
    /// `headers` are sent after it (the application's own, e.g. a record's precondition).
    /// `ackTimeoutMs` (default `timeoutMs`) bounds the wait for the acknowledgement.
    public func publish(subject: String, messageID: String, headers extra: [(name: String, value: String)] = [], payload: [UInt8],
                        ackTimeoutMs: Int64? = nil,
                        completion: @escaping (Result<JSPubAck, JetStreamError>) -> Void) throws(NATSClientError) {
        let headers = NATSHeaders(fields: [(name: JSPubAck.messageIDHeader, value: messageID)] + extra)
        try client.request(subject: subject, headers: headers, payload: payload, timeoutMs: ackTimeoutMs ?? timeoutMs) { result in
            completion(Self.decode(result, JSPubAck.decode))
        }
    }

    static func decode<T>(_ result: Result<NATSMessage, NATSClientError>,
                          _ decoder: ([UInt8]) -> Result<T, JSAPIError>) -> Result<T, JetStreamError> {
        switch result {
        case .failure(let error): return .failure(.client(error))
        case .success(let message):
            if let status = message.status {
                return .failure(.api(JSAPIError(code: status, errorCode: 0, description: "status \(status) \(message.headers?.statusDescription ?? "")")))
            }
            return decoder(message.payload).mapError { .api($0) }
        }
    }
}

/// Why a JetStream call failed: the client's (no connection, timeout, no responders: JetStream
/// is not enabled or the stream does not exist), the API's answer, or a stream not as configured.
public enum JetStreamError: Error, Equatable, Sendable, CustomStringConvertible {
    case client(NATSClientError)
    case api(JSAPIError)
    case mismatch(String)

    public var description: String {
        switch self {
        case .client(let error): return error.description
        case .api(let error): return "JetStream: \(error.description) (code \(error.code), err_code \(error.errorCode))"
        case .mismatch(let why): return "JetStream: \(why)"
        }
    }
}
