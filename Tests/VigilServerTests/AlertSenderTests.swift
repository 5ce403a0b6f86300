import Testing
import VigilCore
import VigilHTTPClient
@testable import VigilServer

/// How the sender reads a push service's or relay's answer, and the push `Topic` it sends.
@Suite struct AlertSenderTests {
    @Test func answersAreReadAsRFC8030Says() {
        #expect(AlertSender.result(status: 201, retryAfterSeconds: nil) == (.accepted, nil))
        #expect(AlertSender.result(status: 200, retryAfterSeconds: nil).0 == .accepted)
        #expect(AlertSender.result(status: 410, retryAfterSeconds: nil) == (.gone, "gone"))
        #expect(AlertSender.result(status: 404, retryAfterSeconds: nil).0 == .gone)
        #expect(AlertSender.result(status: 429, retryAfterSeconds: 7) == (.throttled(retryAfterMs: 7_000), "throttled"))
        #expect(AlertSender.result(status: 503, retryAfterSeconds: nil) == (.throttled(retryAfterMs: nil), "throttled"))
        #expect(AlertSender.result(status: 429, retryAfterSeconds: .max).0 == .throttled(retryAfterMs: .max))
        #expect(AlertSender.result(status: 413, retryAfterSeconds: nil) == (.refused(status: 413), "http_4xx"))
        #expect(AlertSender.result(status: 403, retryAfterSeconds: nil).0 == .refused(status: 403))
        #expect(AlertSender.result(status: 500, retryAfterSeconds: 3) == (.failed, "http_5xx"))
        #expect(AlertSender.result(status: 502, retryAfterSeconds: nil).0 == .failed)
        #expect(AlertSender.result(of: .destinationRefused(.privateNetwork)) == (.refused(status: 0), "destination_refused"))
        #expect(AlertSender.result(of: .invalidRequest("x")).0 == .refused(status: 0))
        #expect(AlertSender.result(of: .timeout(.awaitingResponse)) == (.failed, "timeout"))
        #expect(AlertSender.result(of: .closedEarly).0 == .failed && AlertSender.result(of: .queueFull(.origin)).0 == .failed)
        // Every label the sender counts is one the metrics declare.
        for failure: HTTPClientFailure in [.dns("x"), .connect("x"), .tls("x"), .closedEarly, .shutDown, .malformed("x"), .tooLarge("x")] {
            #expect(AlertCounters.failureReasons.contains(AlertSender.result(of: failure).1!))
        }
    }

    @Test func oneTopicPerStreamAndOnePerCirclesCheckIns() {
        let circle = CircleID(high: 1, low: 2), other = CircleID(high: 1, low: 3)
        let stream = StreamID(high: 5, low: 6)
        func notice(_ kind: NoticeKind, at: Int64, circle c: CircleID = circle, member: UInt32 = 0) -> Notice {
            let id = kind.isAboutStream ? NoticeID(kind: kind, stream: stream, at: at) : NoticeID(kind: kind, circle: c, at: at, member: member)
            return Notice(id: id, circle: c, stream: kind.isAboutStream ? stream : nil, status: .red, audience: .owner, expiresAt: at + 1)
        }
        let started = AlertSender.topic(notice(.panicStarted, at: 1))
        #expect(started.utf8.count == 32 && started.utf8.allSatisfy { $0 == 45 || $0 == 95 || (48...57).contains($0) || (65...90).contains($0) || (97...122).contains($0) })
        #expect(AlertSender.topic(notice(.panicEscalated, at: 9)) == started && AlertSender.topic(notice(.panicEnded, at: 20)) == started)
        let asked = AlertSender.topic(notice(.checkinRequested, at: 3, member: 2))
        #expect(asked != started && AlertSender.topic(notice(.checkinAnswered, at: 4)) == asked)
        #expect(AlertSender.topic(notice(.checkinAnswered, at: 4, circle: other)) != asked)
        // The topic is a hash: the push service learns no id from it.
        #expect(!started.contains(stream.description.prefix(8)))
    }
}
