import Testing
import VigilGeo
@testable import VigilCore

@Suite struct RequestDecoderTests {
    let decoder = RequestDecoder(settings: PinSettings())

    func decode(_ text: String) -> Result<ClientRequest, RejectedRequest> {
        Array(text.utf8).withUnsafeBytes { decoder.decode($0) }
    }

    func error(_ text: String) -> RequestError? {
        if case .failure(let rejected) = decode(text) { return rejected.error }
        return nil
    }

    @Test func decodesEveryOperation() throws {
        let sub = try decode(#"{"op":"subscribe","ref":1,"area":{"bbox":[1,2,3,4]},"categories":["hazard"]}"#).get()
        #expect(sub.ref == .number(1))
        #expect(sub.operation == .subscribe(area: .box(GeoBox(south: 1, west: 2, north: 3, east: 4)), categories: 1 << 2))
        let circle = try decode(#"{"op":"subscribe","ref":"a","area":{"center":{"lat":1,"lon":2},"radius_m":50}}"#).get()
        #expect(circle.ref == .string("a"))
        #expect(circle.operation == .subscribe(area: .circle(center: GeoPoint(lat: 1, lon: 2), radiusMeters: 50), categories: nil))
        #expect(try decode(#"{"op":"unsubscribe"}"#).get().operation == .unsubscribe)
        let create = try decode(#"{"op":"pin.create","pin":{"lat":52.5,"lon":13.4,"title":"  Fox \n","description":" d ","ttl_s":7200.0}}"#).get()
        #expect(create.operation == .pinCreate(PinDraft(point: GeoPoint(lat: 52.5, lon: 13.4), title: "Fox", description: "d", category: "general", ttlSeconds: 7200)))
        let id = "9b2f0c1e-4a7d-4f43-9a51-0d6f7c3e8b12"
        let update = try decode(#"{"op":"pin.update","id":"\#(id)","edit_token":"t","changes":{"lat":1,"title":"x","ttl_s":60}}"#).get()
        #expect(update.operation == .pinUpdate(id: PinID(id), token: "t", changes: PinChanges(lat: 1, title: "x", ttlSeconds: 60)))
        #expect(try decode(#"{"op":"pin.delete","id":"nope","edit_token":"t"}"#).get().operation == .pinDelete(id: nil, token: "t"))
        #expect(try decode(#"{"op":"pin.vote","id":"\#(id)","value":-1}"#).get().operation == .pinVote(id: PinID(id), value: -1))
    }

    @Test(arguments: [
        (#"{"op":"pin.create","pin":{"lat":91,"lon":0,"title":"x"}}"#, "invalid_lat", "pin.lat"),
        (#"{"op":"pin.create","pin":{"lat":"1","lon":0,"title":"x"}}"#, "invalid_lat", "pin.lat"),
        (#"{"op":"pin.create","pin":{"lat":0,"lon":-180.5,"title":"x"}}"#, "invalid_lon", "pin.lon"),
        (#"{"op":"pin.create","pin":{"lat":0,"lon":0,"title":"   "}}"#, "invalid_title", "pin.title"),
        (#"{"op":"pin.create","pin":{"lat":0,"lon":0,"title":5}}"#, "invalid_title", "pin.title"),
        (#"{"op":"pin.create","pin":{"lat":0,"lon":0,"title":"x","category":"cats"}}"#, "invalid_category", "pin.category"),
        (#"{"op":"pin.create","pin":{"lat":0,"lon":0,"title":"x","ttl_s":59}}"#, "invalid_ttl", "pin.ttl_s"),
        (#"{"op":"pin.create","pin":{"lat":0,"lon":0,"title":"x","ttl_s":86401}}"#, "invalid_ttl", "pin.ttl_s"),
        (#"{"op":"pin.create","pin":{"lat":0,"lon":0,"title":"x","ttl_s":60.5}}"#, "invalid_ttl", "pin.ttl_s"),
        (#"{"op":"pin.create","pin":{"lat":0,"lon":0,"title":"x","colour":"red"}}"#, "unknown_field", "pin.colour"),
        (#"{"op":"pin.create","pin":{"lon":0,"title":"x"}}"#, "missing_field", "pin.lat"),
        (#"{"op":"pin.create"}"#, "missing_field", "pin"),
        (#"{"op":"pin.update","id":"x","edit_token":"t","changes":{}}"#, "invalid_changes", "changes"),
        (#"{"op":"pin.update","id":"x","edit_token":"t","changes":{"up":3}}"#, "unknown_field", "changes.up"),
        (#"{"op":"pin.update","id":7,"edit_token":"t","changes":{"lat":1}}"#, "invalid_id", "id"),
        (#"{"op":"pin.delete","id":"x","edit_token":null}"#, "invalid_token", "edit_token"),
        (#"{"op":"pin.vote","id":"x","value":2}"#, "invalid_value", "value"),
        (#"{"op":"subscribe","area":{"bbox":[3,0,1,1]}}"#, "invalid_area", "area"),
        (#"{"op":"subscribe","area":{"bbox":[0,0,1]}}"#, "invalid_area", "area"),
        (#"{"op":"subscribe","area":{"bbox":[0,0,1,1],"center":{"lat":0,"lon":0}}}"#, "invalid_area", "area"),
        (#"{"op":"subscribe","area":{"center":{"lat":0,"lon":0},"radius_m":0}}"#, "invalid_area", "area.radius_m"),
        (#"{"op":"subscribe","area":{"bbox":[0,0,1,1]},"categories":[]}"#, "invalid_categories", "categories"),
        (#"{"op":"subscribe","area":{"bbox":[0,0,1,1],"zoom":3}}"#, "unknown_field", "area.zoom"),
        (#"{"op":"subscribe","area":{"bbox":[0,0,1,1]},"view":"heat"}"#, "invalid_view", "view"),
        (#"{"op":"subscribe","area":{"bbox":[0,0,1,1]},"view":1}"#, "invalid_view", "view"),
        (#"{"op":"fly"}"#, "unknown_op", "op"),
        (#"{"ref":1}"#, "bad_message", "op"),
        (#"[1,2]"#, "bad_message", nil),
        (#"{"op":"unsubscribe","ref":{"a":1}}"#, "invalid_ref", "ref"),
        (#"{"op":"unsubscribe""#, "bad_json", nil),
        (#"{"op":"pin.create","pin":{"lat":1e999,"lon":0,"title":"x"}}"#, "bad_json", nil),
        (#"{"op":"panic.start","status":"green","lat":0,"lon":0}"#, "invalid_status", "status"),
        (#"{"op":"panic.start","status":"red","lon":0}"#, "missing_field", "lat"),
        (#"{"op":"panic.start","status":"red","lat":0,"lon":0,"watchers":0}"#, "invalid_watchers", "watchers"),
        (#"{"op":"panic.start","status":"red","lat":0,"lon":0,"watchers":17}"#, "invalid_watchers", "watchers"),
        (#"{"op":"panic.start","status":"red","lat":0,"lon":0,"accuracy_m":-1}"#, "invalid_accuracy", "accuracy_m"),
        (#"{"op":"panic.update","stream":"s","lat":0,"lon":0,"heading":361}"#, "invalid_heading", "heading"),
        (#"{"op":"panic.update","stream":5,"lat":0,"lon":0}"#, "invalid_stream", "stream"),
        (#"{"op":"panic.end","stream":"s","reason":"bored"}"#, "invalid_reason", "reason"),
        (#"{"op":"panic.watch","stream":"s","watch_token":"t","since":-1}"#, "invalid_since", "since"),
        (#"{"op":"panic.watch","stream":"s"}"#, "missing_field", "watch_token"),
        (#"{"op":"panic.resume","stream":"s"}"#, "missing_field", "owner_token"),
        (#"{"op":"panic.revoke","stream":"s","watch_token":7}"#, "invalid_token", "watch_token"),
        (#"{"op":"panic.fly","stream":"s"}"#, "unknown_op", "op"),
    ] as [(String, String, String?)])
    func rejectsWithTheFieldNamed(_ text: String, _ code: String, _ field: String?) {
        let e = error(text)
        #expect(e?.code == code, "\(text)")
        #expect(e?.field == field, "\(text)")
    }

    @Test func decodesPanicOperations() throws {
        let start = try decode(#"{"op":"panic.start","status":"amber","lat":1,"lon":2,"accuracy_m":5,"note":" home ","watchers":3}"#).get()
        #expect(start.operation == .panicStart(status: .amber, location: PanicLocation(lat: 1, lon: 2, accuracyM: 5), note: "home", watchers: 3, timer: nil))
        #expect(start.operation.isWrite)
        let id = StreamID(random: Array(repeating: 7, count: 16))
        let update = try decode(#"{"op":"panic.update","stream":"\#(id)","lat":1,"lon":2,"heading":90,"speed_mps":1.5}"#).get()
        #expect(update.operation == .panicUpdate(stream: id, ownerToken: nil, location: PanicLocation(lat: 1, lon: 2, heading: 90, speedMps: 1.5)))
        #expect(!update.operation.isWrite, "a person in danger is not held to the pin write limit")
        let watch = try decode(#"{"op":"panic.watch","stream":"nope","watch_token":"w","since":41}"#).get()
        #expect(watch.operation == .panicWatch(stream: nil, watchToken: "w", since: 41))
    }

    @Test func titleLengthCountsCharactersNotBytes() {
        let eighty = String(repeating: "👍🏽", count: 80)
        #expect(error(#"{"op":"pin.create","pin":{"lat":0,"lon":0,"title":"\#(eighty)"}}"#) == nil)
        #expect(error(#"{"op":"pin.create","pin":{"lat":0,"lon":0,"title":"\#(eighty)x"}}"#)?.code == "invalid_title")
        let description = String(repeating: "é", count: 1001)
        #expect(error(#"{"op":"pin.create","pin":{"lat":0,"lon":0,"title":"x","description":"\#(description)"}}"#)?.code == "invalid_description")
    }

    /// One character can be any number of combining marks: 80 of them stacked on 80 letters are 80
    /// characters and kilobytes. The byte cap refuses them with the same code and field as the
    /// character limit, wherever a title, description or note is read.
    @Test func textIsCappedInUTF8BytesAsWellAsCharacters() {
        let stacked = String(repeating: "a" + String(repeating: "\u{301}", count: 20), count: 80)
        #expect(stacked.count == 80 && stacked.utf8.count == 80 * 41)
        let title = error(#"{"op":"pin.create","pin":{"lat":0,"lon":0,"title":"\#(stacked)"}}"#)
        #expect(title?.code == "invalid_title" && title?.field == "pin.title")
        let changed = error(#"{"op":"pin.update","id":"x","edit_token":"t","changes":{"title":"\#(stacked)"}}"#)
        #expect(changed?.code == "invalid_title" && changed?.field == "changes.title")
        let description = error(#"{"op":"pin.create","pin":{"lat":0,"lon":0,"title":"x","description":"\#(stacked)\#(stacked)"}}"#)
        #expect(description == nil, "160 characters and 6,560 bytes fit a description")
        let long = String(repeating: stacked, count: 2)
        let tooLong = error(#"{"op":"pin.update","id":"x","edit_token":"t","changes":{"description":"\#(long)\#(long)"}}"#)
        #expect(tooLong?.code == "invalid_description" && tooLong?.field == "changes.description")
        let note = error(#"{"op":"panic.start","status":"red","lat":0,"lon":0,"note":"\#(stacked)"}"#)
        #expect(note?.code == "invalid_note" && note?.field == "note")
        #expect(error(#"{"op":"panic.start","status":"red","lat":0,"lon":0,"note":"\#(String(repeating: "é", count: 280))"}"#) == nil)
        #expect(error(#"{"op":"panic.start","status":"red","lat":0,"lon":0,"note":"\#(String(repeating: "é", count: 281))"}"#)?.code == "invalid_note")
    }

    /// The caps come from the settings, and each is exact: at the cap passes, one byte more does not.
    @Test func byteCapsAreExactAndConfigurable() {
        var pins = PinSettings()
        pins.titleMaxBytes = 12
        pins.descriptionMaxBytes = 5
        var panic = PanicSettings()
        panic.noteMaxBytes = 4
        let decoder = RequestDecoder(settings: pins, panic: panic)
        func code(_ text: String) -> String? {
            if case .failure(let rejected) = Array(text.utf8).withUnsafeBytes({ decoder.decode($0) }) { return rejected.error.code }
            return nil
        }
        #expect(code(#"{"op":"pin.create","pin":{"lat":0,"lon":0,"title":"  éééééé  "}}"#) == nil, "12 bytes after trimming")
        #expect(code(#"{"op":"pin.create","pin":{"lat":0,"lon":0,"title":"éééééée"}}"#) == "invalid_title")
        #expect(code(#"{"op":"pin.create","pin":{"lat":0,"lon":0,"title":"x","description":"12345"}}"#) == nil)
        #expect(code(#"{"op":"pin.create","pin":{"lat":0,"lon":0,"title":"x","description":"123456"}}"#) == "invalid_description")
        #expect(code(#"{"op":"panic.start","status":"red","lat":0,"lon":0,"note":"🚨"}"#) == nil)
        #expect(code(#"{"op":"panic.start","status":"red","lat":0,"lon":0,"note":"🚨!"}"#) == "invalid_note")
    }

    @Test func theRefIsKeptForErrorReplies() {
        if case .failure(let rejected) = decode(#"{"op":"nope","ref":"r-9"}"#) {
            #expect(rejected.ref == .string("r-9"))
        } else {
            Issue.record("accepted")
        }
    }
}
