import XCTest
#if canImport(Glibc)
import Glibc
#endif
@testable import VigilLoad

final class ProcStatsTests: XCTestCase {
    // Real lines from a Linux 6.x /proc/PID/stat, with the command name varied.
    let plain = "4242 (vigild) S 1 4242 4242 0 -1 4194560 1234 0 0 0 1500 320 0 0 20 0 3 0 987654 123456789 2560 18446744073709551615 1 1 0 0 0 0 0 4096 0 0 0 0 17 1 0 0 0 0 0 0 0 0 0 0 0 0 0"
    let awkward = "77 (my (odd) proc) name)) R 1 77 77 0 -1 4194304 10 0 0 0 7 3 0 0 20 0 12 0 5000 1000 100 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0"

    func testStatGivesCPUTicksAndThreads() {
        XCTAssertEqual(ProcParse.stat(plain), ProcStat(userTicks: 1500, systemTicks: 320, threads: 3))
        XCTAssertEqual(ProcParse.stat(plain)?.totalTicks, 1820)
    }

    func testCommandNamesWithSpacesAndParenthesesAreSkipped() {
        XCTAssertEqual(ProcParse.stat(awkward), ProcStat(userTicks: 7, systemTicks: 3, threads: 12))
    }

    func testMalformedStatIsNil() {
        XCTAssertNil(ProcParse.stat(""))
        XCTAssertNil(ProcParse.stat("4242 vigild S 1 2 3"))
        XCTAssertNil(ProcParse.stat("4242 (vigild) S 1 2 3"), "too few fields")
        XCTAssertNil(ProcParse.stat("1 (x) S 1 1 1 0 -1 0 0 0 0 0 15x0 320 0 0 20 0 3 0 9"), "a non-number")
    }

    func testStatusGivesResidentAndPeakMemory() {
        let status = """
        Name:\tvigild
        Umask:\t0022
        State:\tS (sleeping)
        VmPeak:\t  812345 kB
        VmSize:\t  800000 kB
        VmHWM:\t   65536 kB
        VmRSS:\t   40960 kB
        Threads:\t3
        """
        XCTAssertEqual(ProcParse.status(status), ProcStatus(rssKiB: 40960, peakRSSKiB: 65536))
    }

    func testKernelThreadsHaveNoMemoryLines() {
        XCTAssertNil(ProcParse.status("Name:\tkthreadd\nState:\tS (sleeping)\nThreads:\t1\n"))
        XCTAssertNil(ProcParse.status("VmRSS:\t  12 MB\nVmHWM:\t 12 kB\n"), "unknown unit")
    }

    func testSamplingThisProcessGivesPlausibleFigures() throws {
        let sample = try ProcSampler.sample(pid: getpid())
        XCTAssertGreaterThan(sample.rssKiB, 1024)
        XCTAssertGreaterThanOrEqual(sample.peakRSSKiB, sample.rssKiB)
        XCTAssertGreaterThanOrEqual(sample.openFDs, 3, "stdin, stdout, stderr at least")
        XCTAssertGreaterThanOrEqual(sample.threads, 1)
        XCTAssertGreaterThanOrEqual(sample.cpuSeconds, 0)
        // Burn a little CPU and see our own counter move.
        let before = ProcSampler.selfCPUSeconds()
        var x: UInt64 = 1
        for i in 0..<20_000_000 { x = x &* 6364136223846793005 &+ UInt64(i) }
        XCTAssertNotEqual(x, 0)
        XCTAssertGreaterThan(ProcSampler.selfCPUSeconds(), before)
        XCTAssertGreaterThan(ProcSampler.clockTicksPerSecond, 0)
    }

    func testAMissingProcessNamesTheSyscall() {
        XCTAssertThrowsError(try ProcSampler.sample(pid: Int32.max)) { error in
            XCTAssertEqual(error as? ProcError, .syscall(name: "open", path: "/proc/\(Int32.max)/stat", errno: ENOENT))
            XCTAssertTrue("\(error)".hasPrefix("open(/proc/\(Int32.max)/stat): "), "\(error)")
        }
    }

    func testSamplesOfSeveralProcessesAddUp() {
        let a = ProcSample(cpuSeconds: 1.5, rssKiB: 100, peakRSSKiB: 150, openFDs: 10, threads: 1)
        let b = ProcSample(cpuSeconds: 2.0, rssKiB: 200, peakRSSKiB: 250, openFDs: 20, threads: 2)
        XCTAssertEqual(ProcSample.sum([a, b]), ProcSample(cpuSeconds: 3.5, rssKiB: 300, peakRSSKiB: 400, openFDs: 30, threads: 3))
        XCTAssertEqual(ProcSample.sum([a]), a)
        XCTAssertNil(ProcSample.sum([]))
    }
}
