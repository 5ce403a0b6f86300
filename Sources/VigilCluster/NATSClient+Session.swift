import Glibc
import VigilLoop
import VigilNATS

/// One connection's life: connect, the handshake, the operations, the loss and the next attempt.
extension NATSClient {
    /// Tries `urls[urlIndex]`. A failure to even start (no socket) counts as a failed attempt.
    func connectNext(nowMs: Int64) {
        let url = urls[urlIndex]
        phase = .handshaking(deadlineMs: nowMs + settings.connectTimeoutMs)
        setState(.connecting, reason: "connecting to server \(urlIndex + 1) of \(urls.count)")
        let fd: Int32
        do {
            fd = try Socket.connect(to: ListenAddress(host: url.host, port: url.port))
        } catch {
            let errno = (error as? SystemError)?.errno ?? 0
            lose(reason: "connect: \(String(cString: strerror(errno)))")
            return
        }
        let stream = NATSStream(fd: fd, loop: loop, client: self, payloadCap: settings.payloadCap)
        self.stream = stream
        do {
            try stream.start(connecting: true)
        } catch {
            stream.close()
            lose(reason: "\(error.call): \(String(cString: strerror(error.errno)))")
        }
    }

    /// The TCP connect finished; the server speaks first (INFO).
    func streamConnected(_ from: NATSStream) {}

    func handle(_ op: NATSServerOp, from source: NATSStream) {
        guard source === stream, let stream else { return }
        switch op {
        case .info(let info):
            let firstOnThisConnection = serverInfo == nil
            serverInfo = info
            // A later INFO only updates what the server told us (its cluster changed).
            guard firstOnThisConnection, case .handshaking = phase else { return }
            guard info.headers else { return lose(reason: "the server does not support headers (NATS 2.2 or later needed)") }
            guard !info.tlsRequired else { return lose(reason: "the server requires TLS, which Vigil's NATS client does not speak yet") }
            scratch.removeAll(keepingCapacity: true)
            options.encode(into: &scratch)
            // The inbox and every subscription before the PING: its PONG confirms all of them.
            try? NATSEncoder.subscribe(subject: "\(inboxPrefix).*", sid: inboxSID, into: &scratch)
            for sid in subscriptions.keys.sorted() {
                let s = subscriptions[sid]!
                try? NATSEncoder.subscribe(subject: s.subject, queue: s.queue, sid: sid, into: &scratch)
            }
            NATSEncoder.ping(into: &scratch)
            scratch.withUnsafeBytes { stream.append($0) }
        case .ping:
            scratch.removeAll(keepingCapacity: true)
            NATSEncoder.pong(into: &scratch)
            scratch.withUnsafeBytes { stream.append($0) }
        case .pong:
            pingsOutstanding = 0
            if case .handshaking = phase, serverInfo != nil { becomeUp() }
        case .ok:
            break
        case .error(let text):
            // A permissions violation refuses one operation and keeps the connection; every other
            // -ERR is followed by the server closing it.
            if text.lowercased().hasPrefix("permissions violation") { return }
            lose(reason: "server error: \(text)")
        case .message(let message):
            if message.sid == inboxSID {
                guard let token = message.subject.split(separator: ".").last, let number = UInt64(token) else { return }
                finishRequest(number, message.status == 503 ? .failure(.noResponders) : .success(message))
            } else if let subscription = subscriptions[message.sid] {
                subscription.handler(message)
            }
        }
    }

    private func becomeUp() {
        let now = monotonicMilliseconds()
        phase = .up
        connectedAtMs = now
        nextPingAtMs = now + settings.pingIntervalMs
        failuresThisPass = 0
        connectionCount += 1
        setState(.connected, reason: "connected to server \(urlIndex + 1) of \(urls.count)")
    }

    func sendSubscription(_ sid: UInt64) {
        guard let stream, let s = subscriptions[sid] else { return }
        scratch.removeAll(keepingCapacity: true)
        try? NATSEncoder.subscribe(subject: s.subject, queue: s.queue, sid: sid, into: &scratch)
        scratch.withUnsafeBytes { stream.append($0) }
    }

    func streamLost(_ source: NATSStream, reason: String) {
        guard source === stream else { return }
        lose(reason: reason)
    }

    /// Drops the connection (or the attempt), fails what waited on it and schedules the next
    /// attempt: the next server at once, or, after a full pass failed, a backoff. A connection
    /// that lived a second or more counts as a success (its loss starts a fresh pass); one that
    /// died at once does not, so a server that accepts and drops cannot make the client spin.
    func lose(reason: String) {
        if case .closed = phase { return }
        let now = monotonicMilliseconds()
        let wasUp: Bool = { if case .up = phase { return true } else { return false } }()
        stream?.close()
        stream = nil
        serverInfo = nil
        pingsOutstanding = 0
        if wasUp && now - connectedAtMs >= 1_000 {
            backoff.succeeded()
            failuresThisPass = 0
        }
        failuresThisPass += 1
        urlIndex = (urlIndex + 1) % urls.count
        var delay: Int64 = 0
        if failuresThisPass >= urls.count {
            failuresThisPass = 0
            delay = backoff.nextDelayMs(using: &random)
        }
        phase = .waiting(untilMs: now + delay)
        failAllRequests(.connectionLost)
        setState(.disconnected, reason: reason)
    }
}
