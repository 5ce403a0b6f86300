import VigilWire

/// An owned, comparable copy of a `WireEvent` (data chunks copied out of the
/// caller buffer before it is reused).
enum Ev: Equatable, CustomStringConvertible {
    case start(MessageKind, compressed: Bool)
    case data([UInt8])
    case end
    case ping([UInt8])
    case pong([UInt8])
    case close(UInt16?, String)
    case failure(WireError)

    init?(_ event: WireEvent) {
        switch event {
        case .needMore: return nil
        case .messageStart(let kind, let compressed): self = .start(kind, compressed: compressed)
        case .messageData(let chunk): self = .data(Array(chunk))
        case .messageEnd: self = .end
        case .ping(let p): self = .ping(p)
        case .pong(let p): self = .pong(p)
        case .close(let code, let reason): self = .close(code, reason)
        case .failure(let e): self = .failure(e)
        }
    }

    var description: String {
        switch self {
        case .start(let k, let c): return "start(\(k),\(c))"
        case .data(let d): return "data(\(d.count))"
        case .end: return "end"
        case .ping(let p): return "ping(\(p.count))"
        case .pong(let p): return "pong(\(p.count))"
        case .close(let c, let r): return "close(\(String(describing: c)),\(r))"
        case .failure(let e): return "failure(\(e))"
        }
    }
}

/// Feeds chunks to a reader the way a connection does, collecting events.
/// Stops at the first failure. Asserts data chunks are never empty.
func drive(_ reader: inout MessageReader, _ chunks: [[UInt8]]) -> [Ev] {
    var out: [Ev] = []
    for chunk in chunks {
        var bytes = chunk
        let done: Bool = bytes.withUnsafeMutableBytes { buffer in
            var offset = 0
            while true {
                let event = reader.next(buffer, offset: &offset)
                if case .messageData(let d) = event { precondition(!d.isEmpty, "empty data event") }
                guard let ev = Ev(event) else {
                    precondition(offset == buffer.count, "needMore before the buffer was consumed")
                    return false
                }
                out.append(ev)
                if case .failure = ev { return true }
            }
        }
        if done { break }
    }
    return out
}

func read(_ role: Role = .server, max: Int = 1 << 20, rsv: UInt8 = 0, _ chunks: [[UInt8]]) -> [Ev] {
    var reader = MessageReader(role: role, maxMessageBytes: max, allowedRSV: rsv)
    return drive(&reader, chunks)
}

/// Merges consecutive data chunks, so event lists from different splits compare equal.
func coalesce(_ events: [Ev]) -> [Ev] {
    var out: [Ev] = []
    for ev in events {
        if case .data(let more) = ev, case .data(let have)? = out.last {
            out[out.count - 1] = .data(have + more)
        } else {
            out.append(ev)
        }
    }
    return out
}

func read(_ chunks: [[UInt8]]) -> [Ev] {
    read(.server, chunks)
}
