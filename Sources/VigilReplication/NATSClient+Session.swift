import Glibc
import VigilLoop
import VigilNATS

/// One connection's life: connect, the handshake, the operations, the loss and the next attempt.
/// What happens when is `NATSConnectionPhase`'s (`lifecycle`); here its actions are carried out.
extension NATSClient {
    /// Carries out what `lifecycle` said after an event.
    func perform(_ action: NATSConnectionPhase.Action) {
        switch action {
        case .none, .retry:
            break
        case .connect(let server, let address):
            connectNext(urls[server], number: server, address: address)
        case .sendPing:
            guard let stream else { return }
            scratch.removeAll(keepingCapacity: true)
            NATSEncoder.ping(into: &scratch)
            scratch.withUnsafeBytes { stream.append($0) }
        case .drop(.handshakeTimedOut):
            let step = resolvingID != 0 ? "the server's name was not resolved"
                : stream?.isTransportReady == false ? "the TLS handshake did not finish" : "no answer to CONNECT"
            lose(reason: "\(step) within \(settings.connectTimeoutMs) ms")
        case .drop(.pingsUnanswered(let count)):
            lose(reason: "\(count) PINGs unanswered")
        case .becameUp:
            connectionCount += 1
            setState(.connected, reason: "connected to server \(lifecycle.server + 1) of \(urls.count)")
        }
    }

    /// Tries `url` (server `number` of the list): at `address` when its name was resolved, the
    /// host itself when numeric, otherwise a lookup first (off the loop; the attempt goes on from
    /// `resolved`). A failure to even start (no socket) counts as a failed attempt. The state is
    /// `.connecting` already when a resolved name's first address is tried.
    private func connectNext(_ url: NATSServerURL, number: Int, address: String?) {
        setState(.connecting, reason: "connecting to server \(number + 1) of \(urls.count)")
        if let address { return connect(to: address, url) }
        guard SocketAddress(host: url.host, port: url.port) != nil else { return resolve(url) }
        connect(to: url.host, url)
    }

    /// Asks the resolver thread for `url`'s addresses: every attempt at a name resolves it again
    /// (a server moved by DNS is found on the next pass).
    private func resolve(_ url: NATSServerURL) {
        if resolver == nil {
            do {
                resolver = try NameResolver(threadName: "vigil-nats-dns", loop: loop) { [weak self] in self?.resolved($0) }
            } catch {
                return lose(reason: "no resolver: \(error)")
            }
        }
        resolvingID = nextResolveID
        nextResolveID += 1
        resolver?.resolve(NameResolver.Request(id: resolvingID, host: url.host, port: url.port))
    }

    /// The resolver's answer, on the loop; an answer the attempt no longer waits for is dropped.
    func resolved(_ answer: NameResolver.Answer) {
        guard answer.id == resolvingID, resolvingID != 0, lifecycle.isHandshaking else { return }
        resolvingID = 0
        switch answer.result {
        case .failure(let failure):
            lose(reason: "resolving the server's name: \(failure.reason)")
        case .success(let addresses):
            perform(lifecycle.resolved(addresses))
        }
    }

    private func connect(to address: String, _ url: NATSServerURL) {
        let fd: Int32
        do {
            fd = try Socket.connect(to: ListenAddress(host: address, port: url.port))
        } catch {
            let errno = (error as? SystemError)?.errno ?? 0
            lose(reason: "connect: \(String(cString: strerror(errno)))")
            return
        }
        let stream = NATSStream(fd: fd, loop: loop, client: self, payloadCap: settings.payloadCap)
        self.stream = stream
        do {
            // handshake_first: TLS from the first byte, INFO comes encrypted.
            if let tls, tls.handshakeFirst, tls.applies(to: url) {
                try stream.start(connecting: true, tls: tls.context, verifyName: tls.serverName ?? url.host)
            } else {
                try stream.start(connecting: true)
            }
        } catch {
            stream.close()
            lose(reason: "\(error.call): \(String(cString: strerror(error.errno)))")
        }
    }

    /// The TCP connect finished; the server speaks first (INFO).
    func streamConnected(_ from: NATSStream) {}

    /// The TLS handshake begun after INFO completed: CONNECT goes out, encrypted.
    func streamUpgradedToTLS(_ source: NATSStream) {
        guard source === stream, lifecycle.isHandshaking, let info = serverInfo else { return }
        sendConnect(info)
    }

    func handle(_ op: NATSServerOp, from source: NATSStream) {
        guard source === stream, let stream else { return }
        switch op {
        case .info(let info):
            let firstOnThisConnection = serverInfo == nil
            serverInfo = info
            // A later INFO only updates what the server told us (its cluster changed).
            guard firstOnThisConnection, lifecycle.isHandshaking else { return }
            guard info.headers else { return lose(reason: "the server does not support headers (NATS 2.2 or later needed)") }
            let url = urls[lifecycle.server]
            if stream.usesTLS {
                sendConnect(info)  // handshake_first: INFO came over TLS already
            } else if let tls, tls.applies(to: url) {
                // NATS's order: plaintext INFO, then the client's handshake on the same socket.
                guard info.tlsRequired || info.tlsAvailable else {
                    return lose(reason: "the server does not offer TLS, which tls:// or cluster.tls asks for (never downgraded)")
                }
                guard stream.parser.bufferedBytes == 0 else { return lose(reason: "the server sent more than INFO before TLS") }
                do {
                    try stream.startTLS(tls.context, verifyName: tls.serverName ?? url.host)
                } catch {
                    lose(reason: "TLS: \(error.detail ?? error.call)")
                }
            } else if url.tls || options.tlsRequired {
                // Fail safe: options that ask for TLS never connect in plaintext for want of a context.
                lose(reason: "TLS is asked for (tls:// or cluster.tls) but the client was made without a TLS setup (ClusterSettings.makeClient makes it)")
            } else if info.tlsRequired {
                lose(reason: "the server requires TLS: use tls:// URLs or a cluster.tls section")
            } else {
                sendConnect(info)
            }
        case .ping:
            scratch.removeAll(keepingCapacity: true)
            NATSEncoder.pong(into: &scratch)
            scratch.withUnsafeBytes { stream.append($0) }
        case .pong:
            // Only the PONG to our PING after CONNECT ends the handshake (not one sent before it).
            perform(lifecycle.pongReceived(nowMs: monotonicMilliseconds()))
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

    /// CONNECT (with the nonce's signature for nkey and JWT users), the inbox and every
    /// subscription, then the PING whose PONG confirms all of them.
    private func sendConnect(_ info: NATSServerInfo) {
        guard let stream else { return }
        var signature: String?
        if let seed = options.credentials.signingSeed {
            guard !info.nonce.isEmpty else {
                return lose(reason: "the server sent no nonce to sign: it does not take nkey or JWT users")
            }
            do {
                signature = try NATSNKeySigner.signNonce(info.nonce, with: seed)
            } catch {
                return lose(reason: "nkey: \(error)")
            }
        }
        var connect = options
        connect.tlsRequired = stream.usesTLS
        scratch.removeAll(keepingCapacity: true)
        connect.encode(into: &scratch, signature: signature)
        lifecycle.connectSent()
        try? NATSEncoder.subscribe(subject: "\(inboxPrefix).*", sid: inboxSID, into: &scratch)
        for sid in subscriptions.keys.sorted() {
            let s = subscriptions[sid]!
            try? NATSEncoder.subscribe(subject: s.subject, queue: s.queue, sid: sid, into: &scratch)
        }
        NATSEncoder.ping(into: &scratch)
        scratch.withUnsafeBytes { stream.append($0) }
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

    /// Drops the connection (or the attempt), fails what waited on it (requests are made only
    /// while up: an attempt has none) and says why; `lifecycle` schedules the next attempt (the
    /// next address or server at once, or a backoff after a whole pass failed). Nothing once closed.
    func lose(reason: String) {
        guard case .retry = lifecycle.connectionLost(nowMs: monotonicMilliseconds(), using: &random) else { return }
        stream?.close()
        stream = nil
        serverInfo = nil
        resolvingID = 0
        failAllRequests(.connectionLost)
        setState(.disconnected, reason: reason)
    }
}
