import VigilGeo

/// Turns a client's text message into a validated `ClientRequest`, or the error to answer with.
///
/// Pure code over bytes: the message is parsed by `JSONParser` (strict RFC 8259, bounded depth),
/// then any member the operation does not define is refused (`RequestDecoder+Fields`), and each
/// operation's fields are checked in one place, each failure naming its field.
public struct RequestDecoder: Sendable {
    public let settings: PinSettings
    public let panic: PanicSettings
    public let checkin: CheckinSettings

    public init(settings: PinSettings, panic: PanicSettings = PanicSettings(), checkin: CheckinSettings = CheckinSettings()) {
        self.settings = settings
        self.panic = panic
        self.checkin = checkin
    }

    public func decode(_ bytes: UnsafeRawBufferPointer) -> Result<ClientRequest, RejectedRequest> {
        let value: JSONValue
        do {
            value = try JSONParser.parse(bytes, maxDepth: 16)
        } catch {
            return .failure(RejectedRequest(ref: nil, error: RequestError("bad_json", "the message is not valid JSON: \(error.message) at byte \(error.offset)")))
        }
        guard let object = value.object else {
            return .failure(RejectedRequest(ref: nil, error: RequestError("bad_message", "a message must be a JSON object with an \"op\"")))
        }
        var ref: JSONValue?
        if let r = object["ref"] {
            switch r {
            case .string, .number: ref = r
            default:
                return .failure(RejectedRequest(ref: nil, error: RequestError("invalid_ref", field: "ref", "ref must be a string or a number")))
            }
        }
        guard let opValue = object["op"] else {
            return .failure(RejectedRequest(ref: ref, error: RequestError("bad_message", field: "op", "op is required")))
        }
        guard let op = opValue.string else {
            return .failure(RejectedRequest(ref: ref, error: RequestError("bad_message", field: "op", "op must be a string")))
        }
        do {
            guard let fields = Self.operationFields[op] else { throw RequestError.unknownOp(op) }
            let takesIdem = Self.idempotentOperations.contains(op)
            try Self.refuseUnknownFields(object, allowed: fields, idem: takesIdem)
            let idem = try takesIdem ? idemClaim(object) : nil
            let operation = try decodeOperation(op, object)
            return .success(ClientRequest(ref: ref, operation: operation, idem: idem))
        } catch let error as RequestError {
            return .failure(RejectedRequest(ref: ref, error: error))
        } catch {
            return .failure(RejectedRequest(ref: ref, error: RequestError("bad_message", "\(error)")))
        }
    }

    func decodeOperation(_ op: String, _ o: JSONObject) throws -> ClientOperation {
        switch op {
        case "subscribe":
            guard let area = o["area"] else { throw RequestError.missing("area") }
            var categories: UInt64?
            if let c = o["categories"] { categories = try categoryMask(c) }
            let viewer = try o["viewer"].map { try decodeViewer($0) }
            if try clustersView(o["view"]) { return .subscribeClusters(area: try decodeArea(area), categories: categories) }
            return .subscribe(area: try decodeArea(area), categories: categories, viewer: viewer)
        case "unsubscribe":
            return .unsubscribe
        case "pin.create":
            guard let pin = o["pin"] else { throw RequestError.missing("pin") }
            return .pinCreate(try decodeDraft(pin))
        case "pin.update":
            let id = try pinID(o)
            let token = try editToken(o)
            guard let changes = o["changes"] else { throw RequestError.missing("changes") }
            return .pinUpdate(id: id, token: token, changes: try decodeChanges(changes))
        case "pin.delete":
            let id = try pinID(o)
            return .pinDelete(id: id, token: try editToken(o))
        case "pin.vote":
            let id = try pinID(o)
            guard let v = o["value"] else { throw RequestError.missing("value") }
            guard let n = v.int64, n == 1 || n == -1 else { throw RequestError("invalid_value", field: "value", "value must be 1 or -1") }
            return .pinVote(id: id, value: Int8(n))
        default:
            if op.hasPrefix("panic."), let operation = try decodePanic(op, o) { return operation }
            if op.hasPrefix("checkin."), let operation = try decodeCheckin(op, o) { return .checkin(operation) }
            throw RequestError.unknownOp(op)
        }
    }

    // MARK: fields

    func pinID(_ o: JSONObject) throws -> PinID? {
        guard let v = o["id"] else { throw RequestError.missing("id") }
        guard let text = v.string else { throw RequestError("invalid_id", field: "id", "id must be a string") }
        return PinID(text)
    }

    func editToken(_ o: JSONObject) throws -> String {
        guard let v = o["edit_token"] else { throw RequestError.missing("edit_token") }
        guard let token = v.string else { throw RequestError("invalid_token", field: "edit_token", "edit_token must be a string") }
        return token
    }

    func latitude(_ v: JSONValue, field: String) throws -> Double {
        guard let d = v.double, d.isFinite, d >= -90, d <= 90 else {
            throw RequestError("invalid_lat", field: field, "\(field) must be a finite number between -90 and 90")
        }
        return d
    }

    func longitude(_ v: JSONValue, field: String) throws -> Double {
        guard let d = v.double, d.isFinite, d >= -180, d <= 180 else {
            throw RequestError("invalid_lon", field: field, "\(field) must be a finite number between -180 and 180")
        }
        return d
    }

    func title(_ v: JSONValue, field: String) throws -> String {
        try nonEmptyText(v, field: field, code: "invalid_title", characters: settings.titleMaxCharacters, bytes: settings.titleMaxBytes)
    }

    /// A string of 1 to `characters` characters and at most `bytes` bytes of UTF-8 after trimming
    /// white space (a title, a member's label), or the error `code` naming `field`.
    func nonEmptyText(_ v: JSONValue, field: String, code: String, characters: Int, bytes: Int, what: String? = nil) throws -> String {
        guard let s = v.string else { throw RequestError(code, field: field, "\(field) must be a string") }
        let trimmed = Self.trim(s)
        guard !trimmed.isEmpty, Self.fits(trimmed, characters: characters, bytes: bytes) else {
            throw RequestError(code, field: field,
                               "\(what ?? field) must have 1 to \(characters) characters and at most \(bytes) bytes of UTF-8 after trimming white space")
        }
        return trimmed
    }

    /// An optional note (absent or white space: none) of at most `characters` characters and
    /// `bytes` bytes of UTF-8 after trimming.
    func optionalNote(_ o: JSONObject, characters: Int, bytes: Int) throws -> String? {
        guard let n = o["note"] else { return nil }
        guard let text = n.string else { throw RequestError("invalid_note", field: "note", "note must be a string") }
        let trimmed = Self.trim(text)
        guard Self.fits(trimmed, characters: characters, bytes: bytes) else {
            throw RequestError("invalid_note", field: "note", "note must have at most \(characters) characters and \(bytes) bytes of UTF-8")
        }
        return trimmed.isEmpty ? nil : trimmed
    }

    func description(_ v: JSONValue, field: String) throws -> String {
        let characters = settings.descriptionMaxCharacters, bytes = settings.descriptionMaxBytes
        guard let s = v.string else { throw RequestError("invalid_description", field: field, "\(field) must be a string") }
        let trimmed = Self.trim(s)
        guard Self.fits(trimmed, characters: characters, bytes: bytes) else {
            throw RequestError("invalid_description", field: field, "\(field) must have at most \(characters) characters and \(bytes) bytes of UTF-8")
        }
        return trimmed
    }

    func category(_ v: JSONValue, field: String) throws -> String {
        guard let s = v.string, settings.categoryIndex(s) != nil else {
            throw RequestError("invalid_category", field: field, "\(field) must be one of \(settings.categories.joined(separator: ", "))")
        }
        return s
    }

    func ttl(_ v: JSONValue, field: String) throws -> Int {
        guard let n = v.int64, n >= settings.minTTLSeconds, n <= settings.maxTTLSeconds else {
            throw RequestError("invalid_ttl", field: field, "\(field) must be an integer number of seconds from \(settings.minTTLSeconds) to \(settings.maxTTLSeconds)")
        }
        return Int(n)
    }

    func decodeDraft(_ v: JSONValue) throws -> PinDraft {
        guard let o = v.object else { throw RequestError("bad_message", field: "pin", "pin must be an object") }
        for key in o.keys where !["lat", "lon", "title", "description", "category", "ttl_s", "range_m"].contains(key) {
            throw RequestError.unknownField("pin.\(key)")
        }
        guard let lat = o["lat"] else { throw RequestError.missing("pin.lat") }
        guard let lon = o["lon"] else { throw RequestError.missing("pin.lon") }
        guard let title = o["title"] else { throw RequestError.missing("pin.title") }
        return PinDraft(
            point: GeoPoint(lat: try latitude(lat, field: "pin.lat"), lon: try longitude(lon, field: "pin.lon")),
            title: try self.title(title, field: "pin.title"),
            description: try o["description"].map { try description($0, field: "pin.description") } ?? "",
            category: try o["category"].map { try category($0, field: "pin.category") } ?? "general",
            ttlSeconds: try o["ttl_s"].map { try ttl($0, field: "pin.ttl_s") } ?? settings.defaultTTLSeconds,
            rangeMeters: try o["range_m"].map { try range($0, field: "pin.range_m") }
        )
    }

    func decodeChanges(_ v: JSONValue) throws -> PinChanges {
        guard let o = v.object, !o.members.isEmpty else {
            throw RequestError("invalid_changes", field: "changes", "changes must be an object with at least one field")
        }
        var c = PinChanges()
        for (key, value) in o.members {
            switch key {
            case "lat": c.lat = try latitude(value, field: "changes.lat")
            case "lon": c.lon = try longitude(value, field: "changes.lon")
            case "title": c.title = try title(value, field: "changes.title")
            case "description": c.description = try description(value, field: "changes.description")
            case "category": c.category = try category(value, field: "changes.category")
            case "ttl_s": c.ttlSeconds = try ttl(value, field: "changes.ttl_s")
            case "range_m": c.range = value == .null ? .remove : .set(try range(value, field: "changes.range_m"))
            default: throw RequestError.unknownField("changes.\(key)")
            }
        }
        return c
    }

    func decodeArea(_ v: JSONValue) throws -> GeoArea {
        let invalid = { (why: String) in RequestError("invalid_area", field: "area", "area \(why)") }
        guard let o = v.object else { throw invalid("must be an object with a bbox or a center and radius_m") }
        for key in o.keys where !["bbox", "center", "radius_m"].contains(key) {
            throw RequestError.unknownField("area.\(key)")
        }
        switch (o["bbox"], o["center"]) {
        case (let bbox?, nil):
            guard o["radius_m"] == nil else { throw invalid("takes radius_m only with a center") }
            guard let items = bbox.array, items.count == 4 else { throw invalid("bbox must be [south, west, north, east]") }
            let numbers = items.compactMap { $0.double }
            guard numbers.count == 4, numbers.allSatisfy({ $0.isFinite }) else { throw invalid("bbox must hold four numbers") }
            let box = GeoBox(south: numbers[0], west: numbers[1], north: numbers[2], east: numbers[3])
            guard box.isValid else {
                throw invalid("bbox needs -90 <= south <= north <= 90 and west, east in [-180, 180]")
            }
            return .box(box)
        case (nil, let center?):
            guard let c = center.object, let lat = c["lat"], let lon = c["lon"], c.members.count == 2 else {
                throw invalid("center must be {\"lat\": .., \"lon\": ..}")
            }
            // Coordinates inside an area are area errors (`invalid_area`), naming the field.
            guard let la = lat.double, la.isFinite, la >= -90, la <= 90 else {
                throw RequestError("invalid_area", field: "area.center.lat", "area.center.lat must be a finite number between -90 and 90")
            }
            guard let lo = lon.double, lo.isFinite, lo >= -180, lo <= 180 else {
                throw RequestError("invalid_area", field: "area.center.lon", "area.center.lon must be a finite number between -180 and 180")
            }
            let point = GeoPoint(lat: la, lon: lo)
            guard let r = o["radius_m"] else { throw RequestError.missing("area.radius_m") }
            guard let radius = r.double, radius > 0, radius <= 20_000_000 else {
                throw RequestError("invalid_area", field: "area.radius_m", "area.radius_m must be a number of metres in (0, 20000000]")
            }
            return .circle(center: point, radiusMeters: radius)
        default:
            throw invalid("must have either a bbox or a center (not both)")
        }
    }

    func categoryMask(_ v: JSONValue) throws -> UInt64 {
        let invalid = RequestError("invalid_categories", field: "categories",
                                   "categories must be a non-empty list of: \(settings.categories.joined(separator: ", "))")
        guard let items = v.array, !items.isEmpty else { throw invalid }
        var mask: UInt64 = 0
        for item in items {
            guard let name = item.string, let bit = settings.categoryIndex(name) else { throw invalid }
            mask |= 1 << UInt64(bit)
        }
        return mask
    }

    /// Whether `text` has at most `characters` characters and `bytes` bytes of UTF-8. The bytes
    /// are checked first: `utf8.count` is O(1) for a native string, while counting characters
    /// walks grapheme breaks, so a message of 60 KiB of combining marks is refused at once.
    static func fits(_ text: String, characters: Int, bytes: Int) -> Bool {
        text.utf8.count <= bytes && text.count <= characters
    }

    /// Trims surrounding white space (Unicode White_Space, line breaks included).
    static func trim(_ s: String) -> String {
        guard let first = s.firstIndex(where: { !$0.isWhitespace }) else { return "" }
        let last = s.lastIndex(where: { !$0.isWhitespace })!
        return String(s[first...last])
    }
}

/// A deadline as a request may give it: whole seconds from now, a time in unix ms, or a `true`
/// flag that clears it (`panic.timer`'s `due_in_s` / `due_at` / `cancel`, `checkin.home`'s
/// `for_s` / `until` / `clear`).
enum DeadlineField {
    case inSeconds(Int64), at(Int64), flag
}

extension RequestDecoder {
    /// At most one of the three keys (`flag` nil: that form is not accepted here), each checked:
    /// seconds from 1 to `maxSeconds`; a time in unix ms (whether it is in the future and not too
    /// far is the hub's to judge, with its clock); the flag only `true`. More than one throws
    /// `code` with `tooMany`; none is nil (the caller says what is missing).
    func deadline(_ o: JSONObject, seconds: String, at: String, flag: String?, maxSeconds: Int64,
                  code: String, tooMany: String) throws -> DeadlineField? {
        var found: [DeadlineField] = []
        if let v = o[seconds] {
            guard let n = v.int64, n >= 1, n <= maxSeconds else {
                throw RequestError(code, field: seconds, "\(seconds) must be an integer from 1 to \(maxSeconds)")
            }
            found.append(.inSeconds(n))
        }
        if let v = o[at] {
            guard let n = v.int64, n >= 0, n <= PanicStream.restorableMagnitude else {
                throw RequestError(code, field: at, "\(at) must be a time in unix milliseconds")
            }
            found.append(.at(n))
        }
        if let flag, let v = o[flag] {
            guard v.bool == true else { throw RequestError(code, field: flag, "\(flag) must be true") }
            found.append(.flag)
        }
        guard found.count <= 1 else { throw RequestError(code, tooMany) }
        return found.first
    }
}
