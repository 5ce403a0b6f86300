import CZlib

/// zlib inflate streams and output buffers that inflaters of one event loop hand back between
/// messages, so that freeing a connection's inflater state after every message (no context
/// takeover) costs no malloc and free per message, and an idle connection still holds none.
///
/// Why it works: a message that arrives whole in one read is inflated from start to finish
/// inside one `MessageAssembler.next` call, so the loop needs about one stream at a time; only
/// messages that span reads keep a stream while other connections run. A parked stream has
/// been `inflateReset`: its window allocation stays, its content is gone, so it is as good as
/// new for any connection with the same window size.
///
/// Bounded: at most `maxStreams` streams (each ~7 KiB + 2^windowBits) and `maxBuffers` output
/// buffers of at most `maxBufferBytes` each; beyond that, what comes back is freed.
///
/// One per loop thread; every inflater that uses it runs on that thread (not Sendable).
public final class InflaterPool {
    public let maxStreams: Int
    public let maxBuffers: Int
    public let maxBufferBytes: Int
    private var streams: [(windowBits: Int, stream: ZlibStream)] = []
    private var buffers: [UnsafeMutableRawBufferPointer] = []

    public init(maxStreams: Int = 8, maxBuffers: Int = 8, maxBufferBytes: Int = 64 * 1024) {
        self.maxStreams = max(0, maxStreams)
        self.maxBuffers = max(0, maxBuffers)
        self.maxBufferBytes = max(0, maxBufferBytes)
        streams.reserveCapacity(self.maxStreams)
        buffers.reserveCapacity(self.maxBuffers)
    }

    deinit {
        for parked in streams {
            inflateEnd(parked.stream.stream)
            parked.stream.deallocate()
        }
        for buffer in buffers {
            buffer.deallocate()
        }
    }

    /// Heap bytes parked here.
    public var heapBytes: Int {
        streams.reduce(0) { $0 + $1.stream.heapBytes } + buffers.reduce(0) { $0 + $1.count }
    }

    /// A reset stream for `windowBits`, if one is parked.
    func takeStream(windowBits: Int) -> ZlibStream? {
        guard let i = streams.lastIndex(where: { $0.windowBits == windowBits }) else { return nil }
        return streams.remove(at: i).stream
    }

    /// Parks a stream (reset here), or frees it when the pool is full or the reset fails.
    func park(_ stream: ZlibStream, windowBits: Int) {
        // No pointer into the last message's bytes survives the parking.
        stream.stream.pointee.next_in = nil
        stream.stream.pointee.avail_in = 0
        stream.stream.pointee.next_out = nil
        stream.stream.pointee.avail_out = 0
        if streams.count < maxStreams && inflateReset(stream.stream) == Z_OK {
            streams.append((windowBits, stream))
        } else {
            inflateEnd(stream.stream)
            stream.deallocate()
        }
    }

    /// A parked output buffer, largest last in, if any.
    func takeBuffer() -> UnsafeMutableRawBufferPointer? {
        buffers.popLast()
    }

    /// Parks an output buffer, or frees it when the pool is full or the buffer is too large to keep.
    func park(_ buffer: UnsafeMutableRawBufferPointer) {
        if buffers.count < maxBuffers && buffer.count <= maxBufferBytes {
            buffers.append(buffer)
        } else {
            buffer.deallocate()
        }
    }
}
