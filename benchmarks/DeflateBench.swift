// Micro-benchmark of the message path with and without permessage-deflate, compiled by
// benchmarks/deflate_bench.sh together with the VigilWire sources (so no import of VigilWire).
//
//   deflatebench plain N       N passes over 1,000 masked 64-byte text frames (uncompressed path)
//   deflatebench echo N [MEM]  N compressed echoes: a 300-byte client message inflated by the
//                              assembler (with the loop's InflaterPool), its reply compressed by a
//                              shared Deflater of memory level MEM (default 8) into a reused buffer
// Prints nanoseconds per message. Run under valgrind with two N to count allocations per message.
import Glibc
import VigilBytes

@main
struct DeflateBench {
    static func main() {
        let args = CommandLine.arguments
        let mode = args.count > 1 ? args[1] : "plain"
        let n = args.count > 2 ? Int(args[2]) ?? 100 : 100
        switch mode {
        case "echo": echo(n, memoryLevel: args.count > 3 ? Int(args[3]) ?? 8 : 8)
        default: plain(n)
        }
    }

    static func frame(_ payload: [UInt8], rsv1: Bool) -> [UInt8] {
        FrameEncoder.frame(opcode: .text, payload: payload, fin: true, rsv1: rsv1, maskKey: 0x3D21_FA37)
    }

    static func tenths(_ x: Double) -> String {
        let t = Int((x * 10).rounded())
        return "\(t / 10).\(t % 10)"
    }

    static func now() -> UInt64 {
        var t = timespec()
        clock_gettime(CLOCK_MONOTONIC, &t)
        return UInt64(t.tv_sec) * 1_000_000_000 + UInt64(t.tv_nsec)
    }

    /// Reads `pristine` (copied into `work` first: unmasking is in place) `passes` times.
    static func drive(_ assembler: inout MessageAssembler, _ pristine: [UInt8], _ work: inout [UInt8], _ passes: Int,
                      _ onMessage: (UnsafeRawBufferPointer) -> Void) {
        for _ in 0..<passes {
            work.withUnsafeMutableBytes { buffer in
                _ = pristine.withUnsafeBytes { buffer.copyMemory(from: $0) }
                var offset = 0
                while true {
                    switch assembler.next(buffer, offset: &offset) {
                    case .message(_, let m): onMessage(m)
                    case .needMore: return
                    default: fatalError("unexpected event")
                    }
                }
            }
        }
    }

    /// The uncompressed path: built with `init(reader:)`, which exists before and after
    /// permessage-deflate, so the same source measures both.
    static func plain(_ passes: Int) {
        let one = frame([UInt8](repeating: UInt8(ascii: "x"), count: 64), rsv1: false)
        let pristine = Array((0..<1000).map { _ in one }.joined())
        var work = pristine
        var assembler = MessageAssembler(reader: MessageReader(role: .server, maxMessageBytes: 1 << 20))
        var messages = 0
        var bytes = 0
        let start = now()
        drive(&assembler, pristine, &work, passes) { m in
            messages += 1
            bytes += m.count
        }
        let ns = Double(now() - start) / Double(max(1, messages))
        print("plain: \(messages) messages, \(bytes) bytes, \(tenths(ns)) ns/message")
    }

    static func echo(_ count: Int, memoryLevel: Int) {
        let settings = DeflateSettings(memoryLevel: memoryLevel)
        let parameters = DeflateParameters(serverNoContextTakeover: true, clientNoContextTakeover: true,
                                           serverMaxWindowBits: 15, clientMaxWindowBits: 15)
        let client = Deflater(Deflater.Configuration(parameters, settings))!
        var text: [UInt8] = []
        while text.count < 300 { text += Array("{\"type\":\"pin\",\"lat\":48.8566,\"lon\":2.3522,\"id\":\"a1\"}".utf8) }
        var compressed = [UInt8](repeating: 0, count: client.maxCompressedCount(text.count))
        let n = text.withUnsafeBytes { m in compressed.withUnsafeMutableBytes { client.compress(m, into: $0) } }!
        let pristine = frame(Array(compressed[..<n]), rsv1: true)
        var work = pristine
        var assembler = MessageAssembler(role: .server, maxMessageBytes: 1 << 20, inflation: parameters, pool: InflaterPool())
        let server = Deflater(Deflater.Configuration(parameters, settings), minimumMessageBytes: settings.minimumMessageBytes)!
        let reply = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 16, alignment: 16)
        defer { reply.deallocate() }
        var out = 0
        let start = now()
        drive(&assembler, pristine, &work, count) { m in
            precondition(m.count == text.count && server.shouldCompress(m.count))
            out += server.compress(m, into: reply)!
        }
        let ns = Double(now() - start) / Double(max(1, count))
        print("echo (memLevel \(memoryLevel)): \(count) messages of \(text.count) bytes (\(n) compressed, replies \(out / max(1, count))), \(Int(ns)) ns/message")
    }
}
