import Glibc
import Logging
import Testing
@testable import VigilServer

@Suite struct LogfmtHandlerTests {
    @Test func plainValuesStayBareAndOthersAreQuotedAndEscaped() {
        #expect(LogfmtHandler.quoted("ready") == "ready")
        #expect(LogfmtHandler.quoted("127.0.0.1:8080") == "127.0.0.1:8080")
        #expect(LogfmtHandler.quoted("") == #""""#)
        #expect(LogfmtHandler.quoted("two words") == #""two words""#)
        #expect(LogfmtHandler.quoted(#"say "hi""#) == #""say \"hi\"""#)
        #expect(LogfmtHandler.quoted("a=b") == #""a=b""#)
        #expect(LogfmtHandler.quoted(#"back\slash"#) == #""back\\slash""#)
        #expect(LogfmtHandler.quoted("line\nbreak\r\t\u{1}") == #""line\nbreak\r\t\u{1}""#)
    }

    @Test func aLineHasTimeLevelMessageThenSortedMetadataAndNoNewline() {
        let line = LogfmtHandler.format(level: .notice, message: "shutting down", metadata: ["signal": "SIGTERM", "connections": "3"],
                                        timestamp: "2026-11-24T03:10:00.123Z")
        #expect(line == #"ts=2026-11-24T03:10:00.123Z level=notice msg="shutting down" connections=3 signal=SIGTERM"#)
        let hostile = LogfmtHandler.format(level: .error, message: "x\ny", metadata: ["error": "a\nb", "we ird=key": "v"], timestamp: nil)
        #expect(!hostile.contains("\n"))
        #expect(hostile == #"level=error msg="x\ny" error="a\nb" we_ird_key=v"#)
    }

    @Test func writesOneLinePerEventWithThePriorityPrefixForJournald() throws {
        var fds: [Int32] = [0, 0]
        #expect(pipe(&fds) == 0)
        defer { close(fds[0]) }
        var handler = LogfmtHandler(level: .debug, journald: true, fd: fds[1])
        handler.metadata = ["component": "test"]
        var logger = Logger(label: "t") { _ in handler }
        logger.logLevel = .debug
        logger.warning("disk full", metadata: ["state": "unavailable"])
        logger.debug("connection closed")
        close(fds[1])
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 1024)
        while case let n = read(fds[0], &buffer, buffer.count), n > 0 { bytes += buffer[0..<n] }
        let lines = String(decoding: bytes, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: false)
        #expect(lines == [#"<4>level=warning msg="disk full" component=test state=unavailable"#,
                          #"<7>level=debug msg="connection closed" component=test"#, ""])
    }

    @Test func timestampsAreUTCWithMilliseconds() {
        let ts = LogfmtHandler.timestamp()
        #expect(ts.count == 24 && ts.hasSuffix("Z") && ts.dropFirst(10).first == "T", "\(ts)")
    }
}
