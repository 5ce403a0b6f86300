#if canImport(Darwin)
import Foundation

// NOT COMPILED HERE: the project builds and tests on Linux only, where this file is left out
// (`canImport(Darwin)`). It is written against Apple's documented API
// (`URLSessionWebSocketTask`, `URLSessionWebSocketDelegate`, their completion-handler forms) and
// kept as small as it can be, so that a first build on a Mac has little to correct; everything
// the client does above the transport is tested on Linux over `SocketTransport` and a fake.
// Apple's `Duration` needs macOS 13 / iOS 16, which the `VigilTransport` protocol already uses.

/// The Apple-platform transport: `URLSessionWebSocketTask`, one ephemeral `URLSession` per
/// connection (its delegate tells the open and the close). URLSession answers pings and runs
/// the closing handshake itself; this type only maps messages, close codes and errors to
/// ``TransportError``. Certificates are checked by the system's trust evaluation (ATS); a private
/// CA is trusted the Apple way (a configuration profile), not through this type.
public struct URLSessionTransport: VigilTransport {
    /// The largest message accepted (`maximumMessageSize`); a larger one ends the connection.
    public var maxMessageBytes: Int = 16 << 20
    /// Subprotocols offered; vigild selects `vigil.v1` on /v1.
    public var subprotocols: [String] = ["vigil.v1"]

    public init() {}

    public func connect(to url: URL, timeout: Duration) async throws(TransportError) -> any VigilConnection {
        guard let scheme = url.scheme?.lowercased(), scheme == "ws" || scheme == "wss", url.host != nil else {
            throw .invalidURL(url.absoluteString)
        }
        let events = URLSessionSocketEvents()
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = Self.seconds(timeout)
        let session = URLSession(configuration: configuration, delegate: events, delegateQueue: nil)
        let task = session.webSocketTask(with: url, protocols: subprotocols)
        task.maximumMessageSize = maxMessageBytes
        let opened: Result<Void, TransportError> = await withCheckedContinuation { continuation in
            events.onOpen(continuation)
            task.resume()
        }
        if case .failure(let error) = opened {
            task.cancel()
            session.invalidateAndCancel()
            throw error
        }
        return URLSessionConnection(task: task, session: session, events: events)
    }

    static func seconds(_ d: Duration) -> TimeInterval {
        let (seconds, attoseconds) = d.components
        return TimeInterval(seconds) + TimeInterval(attoseconds) / 1e18
    }
}

/// One `URLSessionWebSocketTask`. Sendable: the task and the session are thread-safe, and the
/// delegate's state is behind its lock.
final class URLSessionConnection: VigilConnection {
    let task: URLSessionWebSocketTask
    let session: URLSession
    let events: URLSessionSocketEvents

    init(task: URLSessionWebSocketTask, session: URLSession, events: URLSessionSocketEvents) {
        self.task = task
        self.session = session
        self.events = events
    }

    func send(_ text: String) async throws(TransportError) {
        let result: Result<Void, TransportError> = await withCheckedContinuation { continuation in
            task.send(.string(text)) { error in
                continuation.resume(returning: error.map { .failure(self.ended($0)) } ?? .success(()))
            }
        }
        try result.get()
    }

    func receive() async throws(TransportError) -> String {
        let result: Result<String, TransportError> = await withCheckedContinuation { continuation in
            task.receive { result in
                switch result {
                case .success(.string(let text)):
                    continuation.resume(returning: .success(text))
                case .success:
                    // Binary (or a future case): Vigil speaks text only (RFC 6455 §7.4.1, 1003).
                    self.task.cancel(with: .unsupportedData, reason: Data("binary message".utf8))
                    continuation.resume(returning: .failure(.protocolViolation("1003 binary message")))
                case .failure(let error):
                    continuation.resume(returning: .failure(self.ended(error)))
                }
            }
        }
        return try result.get()
    }

    func close(code: UInt16, reason: String) async {
        let closeCode = URLSessionWebSocketTask.CloseCode(rawValue: Int(code)) ?? .normalClosure
        var reasonBytes = Array(reason.utf8.prefix(123))
        while let last = reasonBytes.last, last & 0xC0 == 0x80 { reasonBytes.removeLast() }  // whole code points
        task.cancel(with: closeCode, reason: Data(reasonBytes))
        await events.waitForCompletion(timeout: 2)
        session.finishTasksAndInvalidate()
    }

    /// Why the connection ended: the server's close code and reason when it sent one, else the
    /// error as a lost connection.
    func ended(_ error: Error) -> TransportError {
        if task.closeCode != .invalid {
            let reason = task.closeReason.map { String(decoding: $0, as: UTF8.self) } ?? ""
            return .closed(code: UInt16(clamping: task.closeCode.rawValue), reason: reason)
        }
        if let closed = events.closedWith { return closed }
        return .closed(code: nil, reason: error.localizedDescription)
    }
}

/// The session delegate: the open (or the failure before it), the server's close, the end.
final class URLSessionSocketEvents: NSObject, URLSessionWebSocketDelegate, @unchecked Sendable {
    // @unchecked: every field is read and written under `lock` (URLSession calls the delegate
    // on its own queue, the connection from any task).
    private let lock = NSLock()
    private var openWaiter: CheckedContinuation<Result<Void, TransportError>, Never>?
    private var openResult: Result<Void, TransportError>?
    private var completed = false
    private var completionWaiters: [CheckedContinuation<Void, Never>] = []
    private var closed: TransportError?

    var closedWith: TransportError? { locked { closed } }

    /// `NSLocking.withLock` is newer than the platforms this must run on.
    private func locked<T>(_ body: () -> T) -> T {
        lock.lock()
        defer { lock.unlock() }
        return body()
    }

    func onOpen(_ continuation: CheckedContinuation<Result<Void, TransportError>, Never>) {
        let early: Result<Void, TransportError>? = locked {
            if let openResult { return openResult }
            openWaiter = continuation
            return nil
        }
        if let early { continuation.resume(returning: early) }
    }

    private func opened(_ result: Result<Void, TransportError>) {
        let waiter: CheckedContinuation<Result<Void, TransportError>, Never>? = locked {
            guard openResult == nil else { return nil }
            openResult = result
            defer { openWaiter = nil }
            return openWaiter
        }
        waiter?.resume(returning: result)
    }

    func waitForCompletion(timeout: TimeInterval) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let done: Bool = locked {
                if completed { return true }
                completionWaiters.append(continuation)
                return false
            }
            if done {
                continuation.resume()
                return
            }
            DispatchQueue.global().asyncAfter(deadline: .now() + timeout) { self.complete() }
        }
    }

    private func complete() {
        let waiters: [CheckedContinuation<Void, Never>] = locked {
            completed = true
            defer { completionWaiters = [] }
            return completionWaiters
        }
        for waiter in waiters { waiter.resume() }
    }

    func urlSession(_ session: URLSession, webSocketTask: URLSessionWebSocketTask, didOpenWithProtocol protocol: String?) {
        opened(.success(()))
    }

    func urlSession(_ session: URLSession, webSocketTask: URLSessionWebSocketTask,
                    didCloseWith closeCode: URLSessionWebSocketTask.CloseCode, reason: Data?) {
        let text = reason.map { String(decoding: $0, as: UTF8.self) } ?? ""
        locked { closed = closed ?? .closed(code: UInt16(clamping: closeCode.rawValue), reason: text) }
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: Error?) {
        opened(.failure(Self.connectError(error, response: task.response)))
        complete()
    }

    /// A failure before the open, as a `TransportError`.
    static func connectError(_ error: Error?, response: URLResponse?) -> TransportError {
        if let status = (response as? HTTPURLResponse)?.statusCode, status != 101 {
            return .handshake("status \(status)")
        }
        guard let error = error as? URLError else {
            return .connectFailed(error?.localizedDescription ?? "closed before the handshake")
        }
        switch error.code {
        case .timedOut:
            return .timedOut
        case .serverCertificateUntrusted, .serverCertificateHasBadDate, .serverCertificateHasUnknownRoot,
             .serverCertificateNotYetValid, .secureConnectionFailed, .clientCertificateRejected,
             .clientCertificateRequired:
            return .tls(error.localizedDescription)
        case .badServerResponse:
            return .handshake(error.localizedDescription)
        case .badURL, .unsupportedURL:
            return .invalidURL(error.localizedDescription)
        default:
            return .connectFailed(error.localizedDescription)
        }
    }
}
#endif
