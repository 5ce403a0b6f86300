import Testing
@testable import VigilWire
import VigilTestSupport

/// permessage-deflate negotiation, rule by rule (RFC 7692 §5, §7, §7.1).
@Suite struct PerMessageDeflateTests {
    /// Settings that add nothing unasked, so each offer's own effect is visible.
    static let plain = DeflateSettings(serverNoContextTakeover: false, clientNoContextTakeover: false)
    /// What vigild wants: both no-context-takeover parameters always.
    static let daemon = DeflateSettings()

    func header(_ values: [String], _ settings: DeflateSettings = plain) -> String? {
        (try? PerMessageDeflate.negotiate(values, settings: settings))??.responseHeader
    }

    func agreed(_ values: [String], _ settings: DeflateSettings = plain) -> DeflateParameters? {
        (try? PerMessageDeflate.negotiate(values, settings: settings))??.parameters
    }

    /// (offer, response header or nil for declined), with `plain` settings.
    static let table: [(String, String?)] = [
        // RFC 7692 §7.1.3 examples ("permessage-deflate" alone, and the window offers).
        ("permessage-deflate", "permessage-deflate"),
        ("permessage-deflate; client_max_window_bits", "permessage-deflate; client_max_window_bits=15"),
        ("permessage-deflate; server_max_window_bits=10", "permessage-deflate; server_max_window_bits=10"),
        ("permessage-deflate; server_max_window_bits=10, permessage-deflate",
         "permessage-deflate; server_max_window_bits=10"),
        // Each parameter accepted alone.
        ("permessage-deflate; server_no_context_takeover", "permessage-deflate; server_no_context_takeover"),
        ("permessage-deflate; client_no_context_takeover", "permessage-deflate; client_no_context_takeover"),
        ("permessage-deflate; client_max_window_bits=10", "permessage-deflate; client_max_window_bits=10"),
        ("permessage-deflate; client_max_window_bits=8", "permessage-deflate; client_max_window_bits=8"),
        ("permessage-deflate; server_max_window_bits=15", "permessage-deflate; server_max_window_bits=15"),
        ("permessage-deflate; server_max_window_bits=9", "permessage-deflate; server_max_window_bits=9"),
        ("permessage-deflate; server_max_window_bits=\"12\"", "permessage-deflate; server_max_window_bits=12"),
        // All four, in the response's fixed order.
        ("permessage-deflate; client_max_window_bits=12; server_max_window_bits=11; client_no_context_takeover; server_no_context_takeover",
         "permessage-deflate; server_no_context_takeover; client_no_context_takeover; server_max_window_bits=11; client_max_window_bits=12"),
        // Declined: unknown parameter, duplicate, bad values (§7).
        ("permessage-deflate; foo", nil),
        ("permessage-deflate; Server_No_Context_Takeover", nil),
        ("permessage-deflate; server_no_context_takeover; server_no_context_takeover", nil),
        ("permessage-deflate; client_max_window_bits; client_max_window_bits=10", nil),
        ("permessage-deflate; server_max_window_bits=10; server_max_window_bits=10", nil),
        ("permessage-deflate; server_no_context_takeover=1", nil),
        ("permessage-deflate; client_no_context_takeover=\"x\"", nil),
        ("permessage-deflate; server_max_window_bits", nil),
        ("permessage-deflate; server_max_window_bits=7", nil),
        ("permessage-deflate; server_max_window_bits=16", nil),
        ("permessage-deflate; server_max_window_bits=010", nil),
        ("permessage-deflate; server_max_window_bits=09", nil),
        ("permessage-deflate; server_max_window_bits=0", nil),
        ("permessage-deflate; server_max_window_bits=1a", nil),
        ("permessage-deflate; server_max_window_bits=+9", nil),
        ("permessage-deflate; client_max_window_bits=7", nil),
        ("permessage-deflate; client_max_window_bits=16", nil),
        ("permessage-deflate; client_max_window_bits=015", nil),
        ("permessage-deflate; client_max_window_bits=99999999999999999999", nil),
        // Declined: zlib cannot compress with a 256-byte window (§7.1.2.1 lets the server decline).
        ("permessage-deflate; server_max_window_bits=8", nil),
        // Names compare exactly; other extensions are skipped.
        ("PERMESSAGE-DEFLATE", nil),
        ("x-webkit-deflate-frame", nil),
        ("x-webkit-deflate-frame, permessage-deflate", "permessage-deflate"),
        // The first acceptable offer wins, in the client's order (§5).
        ("permessage-deflate; foo, permessage-deflate; client_max_window_bits=9", "permessage-deflate; client_max_window_bits=9"),
        ("permessage-deflate; server_max_window_bits=8, permessage-deflate; server_max_window_bits=9",
         "permessage-deflate; server_max_window_bits=9"),
        ("permessage-deflate; client_max_window_bits=10, permessage-deflate", "permessage-deflate; client_max_window_bits=10"),
        ("permessage-deflate, permessage-deflate; client_max_window_bits=10", "permessage-deflate"),
        ("permessage-deflate; x=1, permessage-deflate; y, permessage-deflate; server_max_window_bits=99", nil),
    ]

    @Test func offersTable() {
        for (offer, expected) in PerMessageDeflateTests.table {
            #expect(header([offer]) == expected, "\(offer)")
        }
    }

    @Test func offersAcrossHeaderLines() {
        #expect(header(["permessage-deflate; foo", "permessage-deflate; server_max_window_bits=12"])
            == "permessage-deflate; server_max_window_bits=12")
        #expect(header([]) == nil)
    }

    @Test func serverSettingsAddOnlyWhatTheRFCAllows() {
        // §7.1.1.1 and §7.1.1.2: both no-context-takeover parameters may be added unasked.
        #expect(header(["permessage-deflate"], PerMessageDeflateTests.daemon)
            == "permessage-deflate; server_no_context_takeover; client_no_context_takeover")
        // server_max_window_bits is not announced unasked, even when the server limits its window;
        // the limit is used all the same.
        let small = DeflateSettings(serverMaxWindowBits: 10, serverNoContextTakeover: true, clientNoContextTakeover: false)
        #expect(header(["permessage-deflate"], small) == "permessage-deflate; server_no_context_takeover")
        #expect(agreed(["permessage-deflate"], small)?.serverMaxWindowBits == 10)
        // client_max_window_bits only when offered (§7.1.2.2: otherwise MUST NOT).
        let tight = DeflateSettings(clientMaxWindowBits: 10, serverNoContextTakeover: false, clientNoContextTakeover: false)
        #expect(header(["permessage-deflate"], tight) == "permessage-deflate")
        #expect(agreed(["permessage-deflate"], tight)?.clientMaxWindowBits == 15)
        #expect(header(["permessage-deflate; client_max_window_bits"], tight) == "permessage-deflate; client_max_window_bits=10")
        #expect(header(["permessage-deflate; client_max_window_bits=12"], tight) == "permessage-deflate; client_max_window_bits=10")
        #expect(header(["permessage-deflate; client_max_window_bits=9"], tight) == "permessage-deflate; client_max_window_bits=9")
    }

    @Test func windowAnswersAreTheSmallerOfOfferAndSetting() {
        for configured in 9...15 {
            let settings = DeflateSettings(serverMaxWindowBits: configured, clientMaxWindowBits: configured,
                                           serverNoContextTakeover: false, clientNoContextTakeover: false)
            for offered in 9...15 {
                let p = agreed(["permessage-deflate; server_max_window_bits=\(offered); client_max_window_bits=\(offered)"], settings)
                #expect(p?.serverMaxWindowBits == min(offered, configured))
                #expect(p?.clientMaxWindowBits == min(offered, configured))
                #expect(p?.inflateWindowBits == min(offered, configured))
            }
        }
        // An agreed client window of 8 is inflated with 9.
        #expect(agreed(["permessage-deflate; client_max_window_bits=8"])?.inflateWindowBits == 9)
    }

    @Test func agreedParameters() {
        let p = agreed(["permessage-deflate; client_no_context_takeover; server_max_window_bits=12"])
        #expect(p == DeflateParameters(serverNoContextTakeover: false, clientNoContextTakeover: true,
                                       serverMaxWindowBits: 12, clientMaxWindowBits: 15))
        let daemon = agreed(["permessage-deflate; client_max_window_bits"], PerMessageDeflateTests.daemon)
        #expect(daemon == DeflateParameters(serverNoContextTakeover: true, clientNoContextTakeover: true,
                                            serverMaxWindowBits: 15, clientMaxWindowBits: 15))
    }

    @Test func settingsClampToWhatZlibCanDo() {
        let s = DeflateSettings(serverMaxWindowBits: 8, clientMaxWindowBits: 3, memoryLevel: 0, compressionLevel: 12, minimumMessageBytes: -5)
        #expect(s.serverMaxWindowBits == 9)
        #expect(s.clientMaxWindowBits == 9)
        #expect(s.memoryLevel == 1)
        #expect(s.compressionLevel == 9)
        #expect(s.minimumMessageBytes == 0)
        #expect(DeflateSettings(serverMaxWindowBits: 20).serverMaxWindowBits == 15)
    }

    @Test func disabledReadsNothing() throws {
        // Not even a malformed header fails the handshake when compression is off.
        #expect(try PerMessageDeflate.negotiate(["permessage-deflate", ";;"], settings: .disabled) == nil)
    }

    @Test func malformedHeaderFailsTheHandshake() {
        // RFC 6455 §4.2.1: a grammar violation is a 400, even after an acceptable offer.
        for values in [["permessage-deflate;"], ["permessage-deflate", "a b"], ["permessage-deflate; x=\"a b\""]] {
            do {
                _ = try PerMessageDeflate.negotiate(values, settings: PerMessageDeflateTests.daemon)
                Issue.record("\(values) should throw")
            } catch {
                #expect(error.handshakeError.status == .badRequest)
            }
        }
    }

    @Test func windowBitsValues() {
        for bits in 8...15 {
            #expect(PerMessageDeflate.windowBits(String(bits)) == bits)
        }
        for bad in [nil, "", "7", "16", "08", "-9", "9 ", "١٠", "1O", "100"] as [String?] {
            #expect(PerMessageDeflate.windowBits(bad) == nil, "\(String(describing: bad))")
        }
    }

    /// The client's side: a response mirrored into what the client's inflater needs (the server's
    /// window and context rule), for every answer the server itself gives.
    @Test func theClientMirrorsTheServersAnswer() throws {
        for offer in ["permessage-deflate", "permessage-deflate; server_max_window_bits=10",
                      "permessage-deflate; client_max_window_bits", "permessage-deflate; client_max_window_bits=9"] {
            let agreement = try #require(try PerMessageDeflate.negotiate([offer], settings: DeflateSettings()))
            let mirror = try #require(PerMessageDeflate.clientInflation(fromResponse: [agreement.responseHeader]))
            #expect(mirror.inflateWindowBits == max(9, agreement.parameters.serverMaxWindowBits), "\(offer)")
            #expect(mirror.clientNoContextTakeover == agreement.parameters.serverNoContextTakeover, "\(offer)")
            #expect(mirror.serverMaxWindowBits == agreement.parameters.clientMaxWindowBits, "\(offer)")
        }
        #expect(PerMessageDeflate.clientInflation(fromResponse: []) == nil)
        #expect(PerMessageDeflate.clientInflation(fromResponse: ["x-other"]) == nil)
        #expect(PerMessageDeflate.clientInflation(fromResponse: ["permessage-deflate; ="]) == nil)
    }

    @Test func aClientRequestCanOfferAnExtension() {
        let request = String(decoding: Handshake.clientRequest(host: "h", path: "/v1", key: "k", subprotocols: [], extensions: "permessage-deflate"), as: UTF8.self)
        #expect(request.contains("\r\nSec-WebSocket-Extensions: permessage-deflate\r\n\r\n"))
        #expect(!String(decoding: Handshake.clientRequest(host: "h", path: "/", key: "k", subprotocols: []), as: UTF8.self).contains("Extensions"))
    }
}
