import Testing
import VigilGeo
@testable import VigilCore

/// `range_m` on pins and `viewer` on subscriptions: what is accepted and what each refusal says.
@Suite struct RequestDecoderReachTests {
    let decoder: RequestDecoder = {
        var settings = PinSettings()
        settings.maxRangeMeters = 5_000
        return RequestDecoder(settings: settings)
    }()

    func decode(_ text: String) -> Result<ClientRequest, RejectedRequest> {
        Array(text.utf8).withUnsafeBytes { decoder.decode($0) }
    }

    @Test func decodesRangesAndViewers() throws {
        let create = try decode(#"{"op":"pin.create","pin":{"lat":1,"lon":2,"title":"x","range_m":5000}}"#).get()
        #expect(create.operation == .pinCreate(PinDraft(point: GeoPoint(lat: 1, lon: 2), title: "x", description: "", category: "general",
                                                        ttlSeconds: PinSettings().defaultTTLSeconds, rangeMeters: 5_000)))
        let id = "9b2f0c1e-4a7d-4f43-9a51-0d6f7c3e8b12"
        let set = try decode(#"{"op":"pin.update","id":"\#(id)","edit_token":"t","changes":{"range_m":1.0}}"#).get()
        #expect(set.operation == .pinUpdate(id: PinID(id), token: "t", changes: PinChanges(range: .set(1))))
        let remove = try decode(#"{"op":"pin.update","id":"\#(id)","edit_token":"t","changes":{"range_m":null}}"#).get()
        #expect(remove.operation == .pinUpdate(id: PinID(id), token: "t", changes: PinChanges(range: .remove)))
        let sub = try decode(#"{"op":"subscribe","area":{"bbox":[1,2,3,4]},"viewer":{"lon":-180,"lat":90}}"#).get()
        #expect(sub.operation == .subscribe(area: .box(GeoBox(south: 1, west: 2, north: 3, east: 4)), categories: nil,
                                            viewer: GeoPoint(lat: 90, lon: -180)))
        let plain = try decode(#"{"op":"subscribe","area":{"bbox":[1,2,3,4]}}"#).get()
        #expect(plain.operation == .subscribe(area: .box(GeoBox(south: 1, west: 2, north: 3, east: 4)), categories: nil, viewer: nil))
    }

    @Test(arguments: [
        (#"{"op":"pin.create","pin":{"lat":0,"lon":0,"title":"x","range_m":0}}"#, "invalid_range", "pin.range_m"),
        (#"{"op":"pin.create","pin":{"lat":0,"lon":0,"title":"x","range_m":5001}}"#, "invalid_range", "pin.range_m"),
        (#"{"op":"pin.create","pin":{"lat":0,"lon":0,"title":"x","range_m":10.5}}"#, "invalid_range", "pin.range_m"),
        (#"{"op":"pin.create","pin":{"lat":0,"lon":0,"title":"x","range_m":"100"}}"#, "invalid_range", "pin.range_m"),
        (#"{"op":"pin.create","pin":{"lat":0,"lon":0,"title":"x","range_m":null}}"#, "invalid_range", "pin.range_m"),
        (#"{"op":"pin.create","pin":{"lat":0,"lon":0,"title":"x","range_m":-3}}"#, "invalid_range", "pin.range_m"),
        (#"{"op":"pin.update","id":"x","edit_token":"t","changes":{"range_m":1e9}}"#, "invalid_range", "changes.range_m"),
        (#"{"op":"pin.update","id":"x","edit_token":"t","changes":{"range_m":false}}"#, "invalid_range", "changes.range_m"),
        (#"{"op":"subscribe","area":{"bbox":[1,2,3,4]},"viewer":[52,13]}"#, "invalid_viewer", "viewer"),
        (#"{"op":"subscribe","area":{"bbox":[1,2,3,4]},"viewer":null}"#, "invalid_viewer", "viewer"),
        (#"{"op":"subscribe","area":{"bbox":[1,2,3,4]},"viewer":{"lat":91,"lon":0}}"#, "invalid_viewer", "viewer.lat"),
        (#"{"op":"subscribe","area":{"bbox":[1,2,3,4]},"viewer":{"lat":"1","lon":0}}"#, "invalid_viewer", "viewer.lat"),
        (#"{"op":"subscribe","area":{"bbox":[1,2,3,4]},"viewer":{"lat":1,"lon":180.01}}"#, "invalid_viewer", "viewer.lon"),
        (#"{"op":"subscribe","area":{"bbox":[1,2,3,4]},"viewer":{"lat":1}}"#, "missing_field", "viewer.lon"),
        (#"{"op":"subscribe","area":{"bbox":[1,2,3,4]},"viewer":{"lon":1}}"#, "missing_field", "viewer.lat"),
        (#"{"op":"subscribe","area":{"bbox":[1,2,3,4]},"viewer":{"lat":1,"lon":1,"accuracy_m":5}}"#, "unknown_field", "viewer.accuracy_m"),
    ])
    func refusals(_ text: String, _ code: String, _ field: String) {
        guard case .failure(let rejected) = decode(text) else {
            Issue.record("accepted \(text)")
            return
        }
        #expect(rejected.error.code == code)
        #expect(rejected.error.field == field)
    }

    @Test func aRefusedViewerIsNotEchoed() {
        guard case .failure(let rejected) = decode(#"{"op":"subscribe","area":{"bbox":[1,2,3,4]},"viewer":{"lat":52.123456,"lon":999.654321}}"#) else {
            Issue.record("accepted")
            return
        }
        #expect(!rejected.error.message.contains("52.123456") && !rejected.error.message.contains("999.654321"))
    }
}
