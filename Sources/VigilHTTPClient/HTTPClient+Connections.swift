import Glibc
import VigilLoop
import VigilWire

/// Carrying out the pool's and the lifecycles' actions, and turning socket and resolver events
/// into lifecycle events. The only code that changes a connection's lifecycle.
///
/// Re-entrancy: an action may lead straight to another event of the same connection (a connect
/// that fails at once, a connection that turns ready and is given the next request); the
/// lifecycles put such actions last in their lists, and a slot is stored back before its
/// actions run, so every step sees the current value.
extension HTTPClient {
    // MARK: the pool's actions

    func perform(_ actions: [HTTPPool.Action]) {
        for action in actions {
            // Closing: what the pool would still open or send stays queued, and `close` fails it.
            if isClosed, case .open = action { continue }
            if isClosed, case .assign = action { continue }
            switch action {
            case .open(let id, let origin):
                counters.connectionsOpened += 1
                logger?.debug("http client: opening a connection", metadata: ["origin": "\(origin)"])
                let (lifecycle, steps) = HTTPConnectionLifecycle.opening(host: origin.host, isAddress: origin.hostIsAddress,
                                                                          nowMs: monotonicMilliseconds(), timeouts)
                while slots.count <= Int(id) { slots.append(nil) }
                slots[Int(id)] = ConnectionSlot(origin: origin, lifecycle: lifecycle)
                perform(steps, on: id)
            case .assign(let request, let connection):
                guard var slot = slots[Int(connection)] else { continue }
                let steps = slot.lifecycle.assigned(request)
                slots[Int(connection)] = slot
                perform(steps, on: connection)
            case .closeIdle(let id):
                // The pool has already forgotten it (and may hand its id out again in this same
                // list), so the lifecycle's release is not reported back.
                guard let slot = slots[Int(id)] else { continue }
                logger?.debug("http client: closing an idle connection for room", metadata: ["origin": "\(slot.origin)"])
                slot.stream?.close()
                connectionTimers.cancel(id)
                slots[Int(id)] = nil
            case .fail(let request, let failure):
                finish(request, .failure(failure))
            }
        }
    }

    // MARK: a lifecycle's actions

    func perform(_ actions: [HTTPConnectionLifecycle.Action], on id: Int32) {
        for action in actions {
            guard let slot = slots[Int(id)] else { return }
            switch action {
            case .resolve:
                resolve(slot.origin, for: id)
            case .connect(let address):
                connect(to: address, slot.origin, for: id)
            case .armTimer(let at):
                connectionTimers.schedule(id, atMs: at)
                try? startClock()
            case .cancelTimer:
                connectionTimers.cancel(id)
            case .send(let request):
                send(request, on: id)
            case .respond(let request):
                guard let message = slot.stream?.message else { continue }
                slot.stream?.message = nil
                finish(request, .response(HTTPClientResponse(message, nowUnixSeconds: Int64(time(nil)))))
            case .fail(let request, let failure):
                finish(request, .failure(failure))
            case .ready:
                perform(pool.connectionReady(id))
            case .closeSocket:
                slot.stream?.close()
                slots[Int(id)]?.stream = nil
            case .release(let failure):
                if let failure {
                    logger?.debug("http client: connection failed", metadata: ["origin": "\(slot.origin)", "reason": "\(failure)"])
                }
                connectionTimers.cancel(id)
                slots[Int(id)] = nil  // before the pool's answer, which may give the id to a new connection
                perform(pool.connectionClosed(id, attemptFailure: failure))
            }
        }
    }

    private func resolve(_ origin: HTTPOrigin, for id: Int32) {
        if resolver == nil {
            do {
                resolver = try NameResolver(threads: settings.resolverThreads, threadName: "vigil-http-dns", loop: loop) { [weak self] in
                    self?.resolved($0)
                }
            } catch {
                return lose(id, .dns("no resolver: \(error)"))
            }
        }
        let request = NameResolver.Request(id: nextResolveID, host: origin.host, port: origin.port)
        nextResolveID += 1
        slots[Int(id)]?.resolveID = request.id
        resolver?.resolve(request)
    }

    /// The resolver's answer, on the loop; one no connection waits for any more is dropped.
    func resolved(_ answer: NameResolver.Answer) {
        guard let id = slots.firstIndex(where: { $0?.resolveID == answer.id }), var slot = slots[id] else { return }
        slot.resolveID = 0
        let actions: [HTTPConnectionLifecycle.Action]
        switch answer.result {
        case .success(let addresses): actions = slot.lifecycle.resolved(addresses)
        case .failure(let failure): actions = slot.lifecycle.resolveFailed(failure.reason)
        }
        slots[id] = slot
        perform(actions, on: Int32(id))
    }

    private func connect(to address: String, _ origin: HTTPOrigin, for id: Int32) {
        if let scope = settings.destinations.refusal(of: address) { return lose(id, .destinationRefused(scope)) }
        let fd: Int32
        do {
            fd = try Socket.connect(to: ListenAddress(host: address, port: origin.port))
        } catch {
            let errno = (error as? SystemError)?.errno ?? 0
            return lose(id, .connect(String(cString: strerror(errno))))
        }
        let stream = HTTPConnection(fd: fd, loop: loop, client: self, slot: id)
        slots[Int(id)]?.stream = stream
        do {
            try stream.start(connecting: true, tls: origin.usesTLS ? tls : nil, verifyName: origin.usesTLS ? origin.host : nil)
        } catch {
            stream.close()
            slots[Int(id)]?.stream = nil
            lose(id, origin.usesTLS ? .tls(error.detail ?? error.call) : .connect(String(cString: strerror(error.errno))))
        }
    }

    private func send(_ request: Int32, on id: Int32) {
        guard let stream = slots[Int(id)]?.stream, let pending = requests[Int(request)] else { return }
        requests[Int(request)]?.connection = id
        inFlight += 1
        if slots[Int(id)]?.lifecycle.served ?? 0 > 0 { counters.connectionReuses += 1 }
        stream.reader = HTTPResponseReader(limits: settings.response, requestWasHead: pending.isHead)
        stream.message = nil
        pending.bytes.withUnsafeBytes { stream.append($0) }
        // The bytes are on the stream's queue now: the request's copy is not needed again.
        requests[Int(request)]?.bytes = []
    }

    /// A lifecycle's `lost` for connection `id`.
    func lose(_ id: Int32, _ failure: HTTPClientFailure) {
        guard var slot = slots[Int(id)] else { return }
        let actions = slot.lifecycle.lost(failure)
        slots[Int(id)] = slot
        perform(actions, on: id)
    }

    // MARK: the streams' events

    /// Whether `stream` is its connection's current socket (a replaced one reports nothing).
    private func isCurrent(_ stream: HTTPConnection) -> Bool {
        Int(stream.slot) < slots.count && slots[Int(stream.slot)]?.stream === stream
    }

    func streamConnected(_ stream: HTTPConnection) {
        guard isCurrent(stream), var slot = slots[Int(stream.slot)] else { return }
        logger?.debug("http client: connected", metadata: ["origin": "\(slot.origin)"])
        let actions = slot.lifecycle.connected(nowMs: monotonicMilliseconds(), timeouts)
        slots[Int(stream.slot)] = slot
        perform(actions, on: stream.slot)
    }

    func streamReceived(_ stream: HTTPConnection, _ bytes: UnsafeRawBufferPointer) {
        guard isCurrent(stream), var slot = slots[Int(stream.slot)] else { return }
        guard let result = stream.reader?.feed(bytes) else {
            let actions = slot.lifecycle.unexpectedInput()
            slots[Int(stream.slot)] = slot
            return perform(actions, on: stream.slot)
        }
        readResult(result, stream)
    }

    /// The server closed its side: the end of a body read until close, or of the connection.
    func streamEnded(_ stream: HTTPConnection) {
        guard isCurrent(stream), let slot = slots[Int(stream.slot)] else { return }
        if let result = stream.reader?.endOfInput() { return readResult(result, stream) }
        let closedBy = "the server closed the connection"
        lose(stream.slot, slot.origin.usesTLS && !stream.isTransportReady ? .tls("\(closedBy) during the handshake") : .connect(closedBy))
    }

    /// A system call on the socket failed: while connecting, a connect or TLS failure with the
    /// system's or OpenSSL's reason; later, the connection ended early.
    func streamFailed(_ stream: HTTPConnection, _ error: SystemError) {
        guard isCurrent(stream), let slot = slots[Int(stream.slot)] else { return }
        let failure: HTTPClientFailure
        if case .busy = slot.lifecycle.phase {
            failure = .closedEarly
        } else if error.call.hasPrefix("TLS") || error.call.hasPrefix("SSL") {
            failure = .tls(error.detail ?? error.call)
        } else {
            failure = .connect(String(cString: strerror(error.errno)))
        }
        lose(stream.slot, failure)
    }

    private func readResult(_ result: HTTPResponseReadResult, _ stream: HTTPConnection) {
        guard var slot = slots[Int(stream.slot)] else { return }
        let actions: [HTTPConnectionLifecycle.Action]
        switch result {
        case .needMore:
            return
        case .complete(let message, let leftover):
            stream.reader = nil
            stream.message = message
            actions = slot.lifecycle.responded(keepAlive: message.keepAlive && leftover == 0, nowMs: monotonicMilliseconds(), timeouts)
        case .failure(let error):
            stream.reader = nil
            switch error {
            case .closedEarly: actions = slot.lifecycle.lost(.closedEarly)
            case .malformed(let why): actions = slot.lifecycle.lost(.malformed(why))
            case .tooLarge(let why): actions = slot.lifecycle.lost(.tooLarge(why))
            }
        }
        slots[Int(stream.slot)] = slot
        perform(actions, on: stream.slot)
    }
}
