import COpenSSL

/// The text of a failed OpenSSL call: its name and, when OpenSSL queued one, its reason. Drains
/// the thread's error queue, so a later failure does not report this one's reason.
enum OpenSSLFailure {
    static func describe(_ call: String) -> String {
        let code = ERR_get_error()
        ERR_clear_error()
        guard code != 0 else { return call }
        var text = [CChar](repeating: 0, count: 256)
        ERR_error_string_n(code, &text, text.count)
        let reason = text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }
        return "\(call): \(String(decoding: reason, as: UTF8.self))"
    }

    /// Forgets what a call that failed on purpose (a validity probe) left in the queue.
    static func discard() { ERR_clear_error() }
}
