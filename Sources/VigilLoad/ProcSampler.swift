#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A failure to sample a process, naming the syscall and errno.
public enum ProcError: Error, Equatable, CustomStringConvertible {
    case syscall(name: String, path: String, errno: Int32)
    /// The file was read but did not hold what `ProcParse` expects.
    case malformed(path: String)

    public var description: String {
        switch self {
        case .syscall(let name, let path, let code):
            return "\(name)(\(path)): \(String(cString: strerror(code))) (errno \(code))"
        case .malformed(let path):
            return "\(path): unexpected format"
        }
    }
}

/// Reads a process's CPU time, memory and open files from `/proc` (Linux), and the load
/// client's own CPU time from `getrusage`.
public enum ProcSampler {
    /// Clock ticks per second, the unit of `/proc/PID/stat`'s CPU times (`sysconf(_SC_CLK_TCK)`,
    /// 100 on every Linux in practice; the fallback is for a failing sysconf).
    public static let clockTicksPerSecond: Double = {
        let ticks = sysconf(Int32(_SC_CLK_TCK))
        return ticks > 0 ? Double(ticks) : 100
    }()

    /// Samples process `pid` (the server). Throws when it is gone or unreadable.
    public static func sample(pid: Int32) throws -> ProcSample {
        let base = "/proc/\(pid)"
        let statText = try readFile("\(base)/stat")
        guard let stat = ProcParse.stat(statText) else { throw ProcError.malformed(path: "\(base)/stat") }
        let statusText = try readFile("\(base)/status")
        guard let status = ProcParse.status(statusText) else { throw ProcError.malformed(path: "\(base)/status") }
        let fds = try countEntries("\(base)/fd")
        return ProcSample(cpuSeconds: Double(stat.totalTicks) / clockTicksPerSecond,
                          rssKiB: status.rssKiB, peakRSSKiB: status.peakRSSKiB,
                          openFDs: fds, threads: stat.threads)
    }

    /// This process's user + system CPU seconds so far (`getrusage(RUSAGE_SELF)`), microsecond
    /// resolution, where /proc/self/stat would give only ticks.
    public static func selfCPUSeconds() -> Double {
        var usage = rusage()
        guard getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage) == 0 else { return 0 }
        func seconds(_ t: timeval) -> Double { Double(t.tv_sec) + Double(t.tv_usec) / 1_000_000 }
        return seconds(usage.ru_utime) + seconds(usage.ru_stime)
    }

    /// The whole of a small file. /proc files report size 0, so read until end of file.
    static func readFile(_ path: String) throws -> String {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw ProcError.syscall(name: "open", path: path, errno: errno) }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n < 0 {
                if errno == EINTR { continue }
                throw ProcError.syscall(name: "read", path: path, errno: errno)
            }
            if n == 0 { break }
            bytes.append(contentsOf: chunk[0..<n])
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Entries of a directory other than `.` and `..` (the open descriptors, for `/proc/PID/fd`).
    static func countEntries(_ path: String) throws -> Int {
        guard let dir = opendir(path) else { throw ProcError.syscall(name: "opendir", path: path, errno: errno) }
        defer { closedir(dir) }
        var count = 0
        while let entry = readdir(dir) {
            let name = entry.pointee.d_name
            let isDot = name.0 == 0x2E && (name.1 == 0 || (name.1 == 0x2E && name.2 == 0))
            if !isDot { count += 1 }
        }
        return count
    }
}
