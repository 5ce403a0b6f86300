import VigilBytes
import VigilWire

/// permessage-deflate on the server: the settings every negotiation starts from, one `Deflater`
/// per distinct setting (shared by every connection that agreed to it), the loop's pool of
/// inflater streams, and a scratch buffer for compressing a reply.
///
/// Sharing a deflater is sound because every agreement carries `server_no_context_takeover`
/// (`DeflateSettings.serverNoContextTakeover`, always on here): each message is compressed from an
/// empty window, so the bytes depend on the message and the setting only. A connection names its
/// setting by a small slot number (0: no compression), and the fan-out compresses an event once
/// per slot in use, never once per subscriber.
final class Compression {
    let settings: DeflateSettings
    let inflaters = InflaterPool()
    private var deflaters: [Deflater] = []
    private var slots: [Deflater.Configuration: UInt8] = [:]
    private var scratch = UnsafeMutableRawBufferPointer.allocate(byteCount: 4096, alignment: 16)
    /// Event frames compressed so far (one per event and setting in use, whatever the recipients).
    private(set) var framesCompressed = 0

    init(settings: DeflateSettings) {
        self.settings = settings
    }

    deinit { scratch.deallocate() }

    /// Number of distinct settings in use (slots are 1 ... count).
    var slotCount: Int { deflaters.count }

    /// The slot of the deflater for an agreement (made on first use; at most 255 settings exist,
    /// since window bits and levels have few values); 0 when no deflater can be made.
    func slot(for parameters: DeflateParameters) -> UInt8 {
        let configuration = Deflater.Configuration(parameters, settings)
        if let slot = slots[configuration] { return slot }
        guard deflaters.count < 255, let deflater = Deflater(configuration, minimumMessageBytes: settings.minimumMessageBytes) else { return 0 }
        deflaters.append(deflater)
        let slot = UInt8(deflaters.count)
        slots[configuration] = slot
        return slot
    }

    func deflater(_ slot: UInt8) -> Deflater { deflaters[Int(slot) - 1] }

    /// `message` compressed with slot's setting into a scratch buffer valid until the next call, or
    /// nil when it is too short to be worth it or does not get smaller.
    func compress(_ message: UnsafeRawBufferPointer, slot: UInt8) -> UnsafeRawBufferPointer? {
        let deflater = deflater(slot)
        guard deflater.shouldCompress(message.count) else { return nil }
        let bound = deflater.maxCompressedCount(message.count)
        if scratch.count < bound {
            scratch.deallocate()
            scratch = .allocate(byteCount: max(bound, scratch.count * 2), alignment: 16)
        }
        guard let n = deflater.compress(message, into: scratch), n < message.count else { return nil }
        return UnsafeRawBufferPointer(rebasing: scratch[0..<n])
    }

    /// An event frame compressed with slot's setting, made from the uncompressed frame's payload
    /// (nil: send the uncompressed frame), ready to be shared like it.
    func compressedFrame(payload: UnsafeRawBufferPointer, slot: UInt8) -> ByteChunk? {
        let deflater = deflater(slot)
        guard deflater.shouldCompress(payload.count) else { return nil }
        framesCompressed += 1
        let chunk = ByteChunk(capacity: SharedFrame.headroom + deflater.maxCompressedCount(payload.count))
        chunk.start = SharedFrame.headroom
        chunk.count = SharedFrame.headroom
        guard deflater.compress(payload, appendingTo: chunk), chunk.count - chunk.start < payload.count else { return nil }
        return SharedFrame.text(chunk, compressed: true)
    }
}
