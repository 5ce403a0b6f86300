import CZlib
#if canImport(Glibc)
import Glibc
#endif

/// A zlib `z_stream` at a fixed heap address, with allocator hooks that count the bytes zlib
/// holds for it. The one place Vigil touches zlib's C structure; `Inflater` and `Deflater`
/// build on it.
///
/// Why the heap: zlib's internal state keeps a pointer back to its `z_stream` and refuses a
/// stream that moved (`inflateStateCheck`), so the struct cannot live inside a Swift value.
/// Why the counting: a connection's inflater and a shared deflater are the largest memory a
/// compressed connection costs, and the figure should be measured, not estimated. The count is
/// a 16-byte prefix per zlib allocation (zlib makes 2 to 5 per stream) and one add per
/// allocation; nothing per byte of data.
struct ZlibStream {
    /// The stream and the running total of zlib's allocations, kept together so the allocator
    /// hook reaches the counter through zlib's `opaque` pointer.
    struct Box {
        var stream = z_stream()
        /// Bytes of zlib's live allocations, and the number of allocations made so far (never
        /// decremented; tests hold the steady state to none). A homogeneous tuple, so its two
        /// counters sit side by side like a C array for the hooks.
        var counters: (heapBytes: Int, allocations: Int) = (0, 0)
    }

    let box: UnsafeMutablePointer<Box>

    /// Allocates the box and installs the counting allocator; zlib's own init comes next.
    init() {
        box = UnsafeMutablePointer<Box>.allocate(capacity: 1)
        box.initialize(to: Box())
        box.pointee.stream.zalloc = ZlibStream.allocate
        box.pointee.stream.zfree = ZlibStream.free
        box.pointee.stream.opaque = UnsafeMutableRawPointer(box) + MemoryLayout<Box>.offset(of: \Box.counters)!
    }

    var stream: UnsafeMutablePointer<z_stream> {
        (UnsafeMutableRawPointer(box) + MemoryLayout<Box>.offset(of: \Box.stream)!).assumingMemoryBound(to: z_stream.self)
    }

    /// Bytes zlib holds for this stream right now (state, window, hash tables), plus the box.
    var heapBytes: Int { box.pointee.counters.heapBytes + MemoryLayout<Box>.size }

    /// zlib allocations so far.
    var allocations: Int { box.pointee.counters.allocations }

    /// Frees the box; zlib's own end (`inflateEnd`/`deflateEnd`) must have run.
    func deallocate() {
        box.deinitialize(count: 1)
        box.deallocate()
    }

    /// Size prefix in front of each block, 16 so zlib's blocks keep malloc's alignment.
    static let prefix = 16

    static let allocate: alloc_func = { opaque, items, size in
        let bytes = Int(items) * Int(size)
        guard let raw = malloc(bytes + ZlibStream.prefix) else { return nil }
        raw.storeBytes(of: bytes, as: Int.self)
        if let counters = opaque?.assumingMemoryBound(to: Int.self) {
            counters[0] += bytes
            counters[1] += 1
        }
        return raw + ZlibStream.prefix
    }

    static let free: free_func = { opaque, address in
        guard let address else { return }
        let raw = address - ZlibStream.prefix
        opaque?.assumingMemoryBound(to: Int.self).pointee -= raw.load(as: Int.self)
        Glibc.free(raw)
    }
}
