import Foundation
import Glibc
@testable import VigilClient

/// A WebSocket server that misbehaves on purpose: it listens on a loopback port, accepts one
/// connection and runs the test's script on it on a thread of its own, with blocking reads and
/// writes bounded by a 5 s receive timeout. The script speaks raw bytes (`StandInPeer`), so it
/// can send what vigild never would: wrong handshakes, masked or binary frames, bad UTF-8,
/// absurd lengths. What it sees of the client comes back through `findings`.
final class StandInServer: Sendable {
    let port: Int
    private let listener: Int32
    let findings: AsyncStream<String>

    init(_ script: @escaping @Sendable (StandInPeer, AsyncStream<String>.Continuation) -> Void) throws {
        listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var one: Int32 = 1
        setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        port = try SocketTransportTests.bindLoopback(listener)
        guard listen(listener, 4) == 0 else { throw DaemonError("listen: \(errno)") }
        let (stream, sink) = AsyncStream.makeStream(of: String.self)
        findings = stream
        let fd = listener
        Thread {
            let client = accept(fd, nil, nil)
            guard client >= 0 else {
                sink.finish()
                return
            }
            let peer = StandInPeer(fd: client)
            script(peer, sink)
            peer.close()
            sink.finish()
        }.start()
    }

    deinit {
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
    }

    func url(_ path: String = "/v1") -> URL { URL(string: "ws://127.0.0.1:\(port)\(path)")! }

    /// The next thing the script reported, within 10 s.
    func next() async throws -> String? {
        let stream = findings
        return try await within(.seconds(10)) {
            var iterator = stream.makeAsyncIterator()
            return await iterator.next()
        }
    }
}

/// The server's side of one connection, in raw bytes.
final class StandInPeer: @unchecked Sendable {
    // @unchecked: used by the script's thread only.
    let fd: Int32
    private var input: [UInt8] = []

    init(fd: Int32) {
        self.fd = fd
        var limit = timeval(tv_sec: 5, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
    }

    func close() {
        if fd >= 0 { Glibc.close(fd) }
    }

    func write(_ bytes: [UInt8]) {
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes { send(fd, $0.baseAddress! + offset, bytes.count - offset, Int32(MSG_NOSIGNAL)) }
            if n <= 0 { return }
            offset += n
        }
    }

    /// Reads more into `input`; false at the end of the connection or the timeout.
    private func fill() -> Bool {
        var buffer = [UInt8](repeating: 0, count: 65536)
        let n = recv(fd, &buffer, buffer.count, 0)
        guard n > 0 else { return false }
        input.append(contentsOf: buffer[0..<n])
        return true
    }

    /// The client's request head; nil if it did not come.
    func readRequest() -> String? {
        while true {
            if let end = input.indices.dropLast(3).first(where: { input[$0] == 13 && input[$0 + 1] == 10 && input[$0 + 2] == 13 && input[$0 + 3] == 10 }) {
                let head = String(decoding: input[..<(end + 4)], as: UTF8.self)
                input.removeFirst(end + 4)
                return head
            }
            guard fill() else { return nil }
        }
    }

    /// The 101 for the client's request, with `accept` (the right one unless given) and `extra`
    /// header lines; `then` bytes go in the same write.
    @discardableResult
    func handshake(accept: String? = nil, extra: String = "", then first: [UInt8] = []) -> Bool {
        guard let request = readRequest(),
              let line = request.split(separator: "\r\n").first(where: { $0.lowercased().hasPrefix("sec-websocket-key:") }) else { return false }
        let key = line.dropFirst("sec-websocket-key:".count).trimmingCharacters(in: .whitespaces)
        let response = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            + "Sec-WebSocket-Accept: \(accept ?? SocketEngine.acceptValue(forKey: key))\r\n\(extra)\r\n"
        write(Array(response.utf8) + first)
        return true
    }

    /// One frame from the client: its first byte, whether it was masked, and the unmasked payload.
    func readFrame() -> (first: UInt8, masked: Bool, payload: [UInt8])? {
        while true {
            if input.count >= 2 {
                let masked = input[1] & 0x80 != 0
                var length = Int(input[1] & 0x7F)
                var offset = 2
                if length == 126 {
                    guard input.count >= 4 else { if !fill() { return nil }; continue }
                    length = Int(input[2]) << 8 | Int(input[3])
                    offset = 4
                } else if length == 127 {
                    guard input.count >= 10 else { if !fill() { return nil }; continue }
                    length = input[2..<10].reduce(0) { $0 << 8 | Int($1) }
                    offset = 10
                }
                let maskOffset = offset
                if masked { offset += 4 }
                if input.count >= offset + length {
                    var payload = Array(input[offset..<(offset + length)])
                    if masked {
                        for i in payload.indices { payload[i] ^= input[maskOffset + i % 4] }
                    }
                    let first = input[0]
                    input.removeFirst(offset + length)
                    return (first, masked, payload)
                }
            }
            guard fill() else { return nil }
        }
    }

    /// The code and reason of the client's next frame if it is a close.
    func readClose() -> String {
        guard let frame = readFrame() else { return "no frame" }
        guard frame.first == 0x88 else { return "frame \(String(frame.first, radix: 16))" }
        guard frame.payload.count >= 2 else { return "close without code" }
        let code = Int(frame.payload[0]) << 8 | Int(frame.payload[1])
        return "close \(code) \(String(decoding: frame.payload[2...], as: UTF8.self))"
    }

    /// Whether the client ended the TCP connection (a read of 0) within the receive timeout.
    func readsEnd() -> Bool {
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = recv(fd, &buffer, buffer.count, 0)
            if n == 0 { return true }
            if n < 0 { return errno == ECONNRESET }
        }
    }

    /// A server frame (unmasked unless `mask`), FIN set unless `fin` is false.
    static func frame(_ opcode: UInt8, _ payload: [UInt8], fin: Bool = true, mask: [UInt8]? = nil) -> [UInt8] {
        var out: [UInt8] = [(fin ? 0x80 : 0) | opcode]
        let maskBit: UInt8 = mask == nil ? 0 : 0x80
        if payload.count < 126 {
            out.append(maskBit | UInt8(payload.count))
        } else if payload.count <= 0xFFFF {
            out += [maskBit | 126, UInt8(payload.count >> 8), UInt8(payload.count & 0xFF)]
        } else {
            out.append(maskBit | 127)
            for shift in stride(from: 56, through: 0, by: -8) { out.append(UInt8((payload.count >> shift) & 0xFF)) }
        }
        if let mask {
            out += mask
            out += payload.enumerated().map { $0.element ^ mask[$0.offset % 4] }
        } else {
            out += payload
        }
        return out
    }

    static func text(_ s: String, fin: Bool = true) -> [UInt8] { frame(0x1, Array(s.utf8), fin: fin) }
}
