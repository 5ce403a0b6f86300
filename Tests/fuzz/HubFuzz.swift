// libFuzzer entry point for the live map (VigilCore's MapHub); built and run by Tests/fuzz/run.
// Compiled with Tests/VigilTestSupport/{MapHubOracle,CheckedMapHub,PinNotice}.swift and HubScript.swift,
// against VigilCore and VigilGeo built by SwiftPM with coverage instrumentation.
//
// The input is a script of operations on one hub: subscribe subscriber k to a box or circle and a
// category mask, unsubscribe, create a pin at a point, move or edit it, delete it (sometimes with a
// wrong token or an unknown id), vote on it (a few voters, a low flag threshold and voter cap),
// advance the clock and expire. After every operation CheckedMapHub
// compares the hub's answer and deliveries with the brute-force oracle (a plain list of
// subscriptions and pins): exactly the right subscribers, each told once, of the right kind.
// Any difference stops the run with fatalError, whose message (kept in -O builds, unlike a
// precondition's) says which operation differed and how.
import VigilCore
import VigilGeo

@_cdecl("LLVMFuzzerTestOneInput")
public func hubFuzzEntry(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    var script = HubScript(UnsafeBufferPointer(start: data, count: size))
    // Small limits, so that capacity refusals and truncated subscribe replies happen; the first
    // byte varies how subscriptions are covered (finest precision, cell budget).
    var settings = PinSettings()
    settings.maxPins = 48
    settings.maxVotersPerPin = 4
    settings.voteFlagThreshold = 3
    let shape = script.byte()
    settings.maxSubscribePins = 1 + Int(shape & 0x0F)
    settings.cellPrecisionMax = 4 + Int(shape >> 5)                     // 4 ... 11
    settings.coverCellBudget = 32 + 8 * Int(shape >> 4 & 1)
    var checked = CheckedMapHub(settings: settings)
    let owner = digest(1), stranger = digest(2)
    var now: Int64 = 1_700_000_000_000
    var serial: UInt64 = 0
    // A pin restored from a snapshot can carry a category the operator has since removed from the
    // configuration; new pins and edits only ever carry listed ones (the decoder checks).
    let categories = settings.categories + ["withdrawn"]

    while !script.isAtEnd {
        let problem: String?
        switch script.byte() % 9 {
        case 0:
            let subscriber = Int32(script.byte() % 8)
            let area = script.area()
            let mask = script.byte()
            problem = checked.subscribe(subscriber, area: area, categories: mask == 0 ? nil : UInt64(mask))
        case 1:
            problem = checked.unsubscribe(Int32(script.byte() % 8))
        case 2, 3:
            serial += 1
            let point = script.point()
            let category = categories[Int(script.byte()) % categories.count]
            let draft = PinDraft(point: point, title: "pin \(serial)", description: "", category: category,
                                 ttlSeconds: 60 + 15 * Int(script.byte()))
            problem = checked.create(draft, id: PinID(high: serial, low: 0), editDigest: owner, now: now)
        case 4:
            let pins = checked.oracle.pins
            let pick = Int(script.byte()), flags = script.byte()
            guard !pins.isEmpty else { continue }
            var changes = PinChanges()
            if flags & 1 != 0 { changes.lat = script.latitude() }
            if flags & 2 != 0 { changes.lon = script.longitude() }
            if flags & 4 != 0 { changes.category = settings.categories[Int(script.byte()) % settings.categories.count] }
            if flags & 8 != 0 { changes.ttlSeconds = 60 + 15 * Int(script.byte()) }
            if flags & 15 == 0 { changes.title = "edited" }
            let token = flags & 0x30 == 0x30 ? stranger : owner
            problem = checked.update(pins[pick % pins.count].id, digest: token, changes: changes, now: now)
        case 5:
            let pins = checked.oracle.pins
            let pick = Int(script.byte()), flags = script.byte()
            let id = pins.isEmpty || flags & 0x30 == 0x10 ? PinID(high: .max, low: UInt64(pick)) : pins[pick % pins.count].id
            problem = checked.delete(id, digest: flags & 0x30 == 0x30 ? stranger : owner)
        case 6:
            now += Int64(script.word(2)) * 100                              // up to 109 minutes
            problem = checked.expire(now: now)
        case 7:
            let pins = checked.oracle.pins
            let pick = Int(script.byte()), flags = script.byte()
            let id = pins.isEmpty || flags & 0x80 != 0 ? PinID(high: .max, low: UInt64(pick)) : pins[pick % pins.count].id
            problem = checked.vote(id, voter: UInt64(flags & 7), value: flags & 8 == 0 ? 1 : -1)
        default:
            problem = checked.expire(now: now)                              // again: nothing is due twice
        }
        if let problem { fatalError(problem) }
    }
    return 0
}

/// A token digest that is 32 copies of `byte`: the hub only compares digests.
private func digest(_ byte: UInt8) -> TokenDigest {
    TokenDigest(bytes: [UInt8](repeating: byte, count: 32))
}
