/// What `/proc/PID/stat` says about CPU time and threads.
public struct ProcStat: Equatable, Sendable {
    /// User-mode CPU time in clock ticks (field 14).
    public var userTicks: UInt64
    /// Kernel-mode CPU time in clock ticks (field 15).
    public var systemTicks: UInt64
    /// Field 20.
    public var threads: Int

    public init(userTicks: UInt64, systemTicks: UInt64, threads: Int) {
        self.userTicks = userTicks
        self.systemTicks = systemTicks
        self.threads = threads
    }

    public var totalTicks: UInt64 { userTicks + systemTicks }
}

/// What `/proc/PID/status` says about memory.
public struct ProcStatus: Equatable, Sendable {
    /// Resident set size now (`VmRSS`), KiB.
    public var rssKiB: UInt64
    /// Peak resident set size (`VmHWM`, the high-water mark), KiB.
    public var peakRSSKiB: UInt64

    public init(rssKiB: UInt64, peakRSSKiB: UInt64) {
        self.rssKiB = rssKiB
        self.peakRSSKiB = peakRSSKiB
    }
}

/// Pure parsers for the `/proc` files the load client samples the server from. Kept apart from
/// the reading (`ProcSampler`) so the tests feed them sample text, awkward process names included.
public enum ProcParse {
    /// Parses `/proc/PID/stat`. The second field, the command name in parentheses, may itself
    /// hold spaces and parentheses (`(my (odd) proc)`): the kernel does not escape it, so the
    /// fields after it are found from the *last* `)`, which the name cannot follow.
    public static func stat(_ text: String) -> ProcStat? {
        guard let close = text.utf8.lastIndex(of: UInt8(ascii: ")")) else { return nil }
        let rest = text.utf8[text.utf8.index(after: close)...]
        let fields = rest.split(separator: UInt8(ascii: " "), omittingEmptySubsequences: true)
        // fields[0] is field 3 (state), so field n is fields[n - 3].
        guard fields.count > 17,
              let user = number(fields[14 - 3]),
              let system = number(fields[15 - 3]),
              let threads = number(fields[20 - 3])
        else { return nil }
        return ProcStat(userTicks: user, systemTicks: system, threads: Int(clamping: threads))
    }

    /// Parses `/proc/PID/status` for `VmRSS` and `VmHWM` (lines like `VmRSS:\t   10240 kB`).
    /// A kernel thread has neither: nil.
    public static func status(_ text: String) -> ProcStatus? {
        var rss: UInt64?
        var peak: UInt64?
        for line in text.utf8.split(separator: UInt8(ascii: "\n")) {
            if line.starts(with: "VmRSS:".utf8) {
                rss = kibibytes(line.dropFirst(6))
            } else if line.starts(with: "VmHWM:".utf8) {
                peak = kibibytes(line.dropFirst(6))
            }
        }
        guard let rss, let peak else { return nil }
        return ProcStatus(rssKiB: rss, peakRSSKiB: peak)
    }

    /// `   10240 kB` → 10240.
    private static func kibibytes(_ value: Substring.UTF8View.SubSequence) -> UInt64? {
        let parts = value.split(whereSeparator: { $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\t") })
        guard parts.count == 2, parts[1].elementsEqual("kB".utf8) else { return nil }
        return number(parts[0])
    }

    private static func number<S: Collection>(_ digits: S) -> UInt64? where S.Element == UInt8 {
        guard !digits.isEmpty else { return nil }
        var value: UInt64 = 0
        for byte in digits {
            guard byte >= 0x30, byte <= 0x39 else { return nil }
            let (times10, o1) = value.multipliedReportingOverflow(by: 10)
            let (sum, o2) = times10.addingReportingOverflow(UInt64(byte - 0x30))
            if o1 || o2 { return nil }
            value = sum
        }
        return value
    }
}

/// One look at a process: the figures the report prints for the server.
public struct ProcSample: Equatable, Sendable {
    /// User + system CPU time since the process started, seconds.
    public var cpuSeconds: Double
    public var rssKiB: UInt64
    public var peakRSSKiB: UInt64
    public var openFDs: Int
    public var threads: Int

    public init(cpuSeconds: Double, rssKiB: UInt64, peakRSSKiB: UInt64, openFDs: Int, threads: Int) {
        self.cpuSeconds = cpuSeconds
        self.rssKiB = rssKiB
        self.peakRSSKiB = peakRSSKiB
        self.openFDs = openFDs
        self.threads = threads
    }

    /// Several processes (the nodes of a cluster on one machine) as one: every figure summed,
    /// peak RSS included (the sum of each one's peak, an upper bound of the peak of the sum).
    public static func sum(_ samples: [ProcSample]) -> ProcSample? {
        guard var total = samples.first else { return nil }
        for s in samples.dropFirst() {
            total.cpuSeconds += s.cpuSeconds
            total.rssKiB += s.rssKiB
            total.peakRSSKiB += s.peakRSSKiB
            total.openFDs += s.openFDs
            total.threads += s.threads
        }
        return total
    }
}
