import Foundation
import VigilServer
import VigilState

/// `vigild state inspect`'s digest rules: the settings of `--config` (or the defaults) and the
/// time of `--at` (or now).
enum StateDigestRules {
    static func rules(config path: String?, at: Int64?) throws -> StateDigest.Rules {
        let config = try path.map { try Vigild.loadConfig(path: $0) } ?? ServerConfig()
        let now = at ?? Int64((Date().timeIntervalSince1970 * 1000).rounded(.down))
        return StateDigest.Rules(now: now, panic: config.panic, checkin: config.checkin)
    }
}
