import Testing
@testable import VigilPush

/// The `sub` claim: a mailto: address or an https: URL, nothing else.
@Suite struct VAPIDSubjectTests {
    @Test func contacts() throws {
        #expect(try VAPIDSubject("mailto:ops@vigil.example").uri == "mailto:ops@vigil.example")
        #expect(try VAPIDSubject("https://vigil.example/contact").uri == "https://vigil.example/contact")
        #expect(try VAPIDSubject("MAILTO:Ops@Vigil.Example").uri == "MAILTO:Ops@Vigil.Example")
    }

    @Test func refusals() {
        let long = "mailto:" + String(repeating: "a", count: 250) + "@x.example"
        for bad in ["ops@vigil.example", "mailto:", "mailto:ops", "mailto:@vigil.example", "mailto:ops@", "http://vigil.example",
                    "https://", "https:///x", "mailto:o ps@vigil.example", "mailto:ops@vigil.example\n", "", long] {
            #expect(throws: VAPIDError.badSubject(bad), "\(bad)") { try VAPIDSubject(bad) }
        }
    }
}
