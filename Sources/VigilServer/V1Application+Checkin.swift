import VigilCore
import VigilPush
import VigilState

/// The `checkin.*` operations (docs/PROTOCOL.md, "Check-in circles").
///
/// A `circle` that is not a well-formed circle id (decoded as nil) gets the same `forbidden` as a
/// wrong token, so an answer never tells whether a circle exists. Every change is journaled as the
/// circle's whole state (`circlePut`) or its removal, before its reply and its news go out.
extension V1Application {
    private static let circleForbidden = Outcome(.error(.from(CheckinFailure.forbidden)))

    func checkinOperation(_ op: CheckinOperation, caller: Caller, now: Int64) -> Outcome {
        let me = caller.fd
        switch op {
        case .create(let labels):
            return createCircle(labels: labels, caller: caller, now: now)
        case .open(let circle, let token):
            guard let circle else { return Self.circleForbidden }
            return Self.checkinReply(checkin.open(circle, by: me, ownerToken: token, secrets: secrets).map {
                .state($0, role: .owner, settings: checkin.settings, panics: panic.streams(of: circle), acks: checkin.acks(of: circle))
            })
        case .join(let circle, let token):
            guard let circle else { return Self.circleForbidden }
            return Self.checkinReply(checkin.join(circle, by: me, memberToken: token, secrets: secrets).map {
                .state($0.circle, role: .member($0.member.id), settings: checkin.settings, panics: panic.streams(of: circle),
                       acks: checkin.acks(of: circle))
            })
        case .leave(let circle):
            if let circle { checkin.leave(circle, by: me) }
            return Outcome(.ok)
        case .invite(let circle, let token, let label):
            guard let circle else { return Self.circleForbidden }
            let before = checkin.checkpoint(circle)
            switch checkin.invite(circle, ownerToken: token, label: label, secrets: secrets, now: now) {
            case .success(let invited):
                return Outcome(.checkin(.invited(invited.member, token: invited.token)), record: .circlePut(invited.circle),
                               undo: .circle(before))
            case .failure(let failure):
                return Outcome(.error(.from(failure)))
            }
        case .revoke(let circle, let token, let member):
            guard let circle else { return Self.circleForbidden }
            return revokeMember(member, of: circle, ownerToken: token, now: now)
        case .register(let circle, let credential, let target):
            if let refused = refuseUnusable(target) { return refused }
            guard let circle else { return Self.circleForbidden }
            let before = checkin.checkpoint(circle)
            switch checkin.register(circle, credential: credential, target: target, secrets: secrets, now: now) {
            case .success(let registered):
                let reply = Reply.checkin(.registered(registered.subscription))
                guard let changed = registered.circle else { return Outcome(reply) }  // held already, unchanged
                return Outcome(reply, record: .circlePut(changed), undo: .circle(before))
            case .failure(let failure):
                return Outcome(.error(.from(failure)))
            }
        case .ack(let circle, let credential, let notice):
            guard let circle else { return Self.circleForbidden }
            let before = checkin.checkpoint(circle)
            let belongs = notice.map { noticeBelongs($0, to: circle) } ?? false
            switch checkin.acknowledge(circle, credential: credential, notice: notice, belongs: belongs, ttlMs: noticeTTLMs,
                                       secrets: secrets, now: now, out: &scratch.checkin) {
            case .success(let ack?):
                turnAcks.append(ack)
                return Outcome(.ok, record: .noticeAcked(ack), undo: .circle(before))
            case .success(nil):
                return Outcome(.ok)  // acknowledged already: nothing changed
            case .failure(let failure):
                return Outcome(.error(.from(failure)))
            }
        case .unregister(let circle, let credential, let subscription):
            guard let circle else { return Self.circleForbidden }
            let before = checkin.checkpoint(circle)
            // Not one of the caller's: nothing changed, nothing to journal.
            return Self.okIfChanged(checkin.unregister(circle, credential: credential, subscription: subscription, secrets: secrets,
                                                       now: now), before)
        case .request(let circle, let token):
            guard let circle else { return Self.circleForbidden }
            let before = checkin.checkpoint(circle)
            switch checkin.request(circle, memberToken: token, secrets: secrets, now: now, out: &scratch.checkin) {
            case .success(let asked):
                notify(.checkinRequested(circle, ask: asked.ask, ttlMs: noticeTTLMs))
                return Outcome(.checkin(.requested(asked.ask)), record: .circlePut(asked.circle), undo: .circle(before))
            case .failure(let failure):
                if case .rateLimited = failure { stats.refused(.checkinRequests) }
                return Outcome(.error(.from(failure)))
            }
        case .answer(let circle, let token, let note):
            guard let circle else { return Self.circleForbidden }
            let before = checkin.checkpoint(circle)
            switch checkin.answer(circle, ownerToken: token, note: note, secrets: secrets, now: now, out: &scratch.checkin) {
            case .success(let answered):
                guard let answer = answered.answer else { return Outcome(.ok) }
                notify(.checkinAnswered(circle, answer: answer, ttlMs: noticeTTLMs))
                return Outcome(.checkin(.answered(answer)), record: .circlePut(answered), undo: .circle(before))
            case .failure(let failure):
                return Outcome(.error(.from(failure)))
            }
        case .home(let circle, let token, let change):
            guard let circle else { return Self.circleForbidden }
            let before = checkin.checkpoint(circle)
            switch checkin.setHome(circle, ownerToken: token, change: change, secrets: secrets, now: now, out: &scratch.checkin) {
            case .success(let changed?):
                return Outcome(.checkin(.home(changed.home)), record: .circlePut(changed), undo: .circle(before))
            case .success(nil):
                return Outcome(.checkin(.home(nil)))  // cleared when none was set: nothing to journal
            case .failure(let failure):
                return Outcome(.error(.from(failure)))
            }
        case .close(let circle, let token):
            guard let circle else { return Self.circleForbidden }
            let before = checkin.checkpoint(circle)
            switch checkin.close(circle, ownerToken: token, secrets: secrets, out: &scratch.checkin) {
            case .success:
                return Outcome(.ok, record: .circleRemove(circle), undo: .circle(before))
            case .failure(let failure):
                return Outcome(.error(.from(failure)))
            }
        }
    }

    /// A member revoked loses both what its token opened, in one step that asks both hubs: the
    /// circle (its listening connections get `checkin.revoked`) and its watching of the circle's
    /// streams (those watchers get `panic.revoked`). Taken back together if not recorded.
    private func revokeMember(_ member: UInt32, of circle: CircleID, ownerToken: String, now: Int64) -> Outcome {
        let before = checkin.checkpoint(circle)
        let digest = before.before?.members.first { $0.id == member }?.tokenDigest
        let streams = panic.streams(of: circle).compactMap { panic.checkpoint($0.id, keepingWatchers: true) }
        switch checkin.revoke(circle, ownerToken: ownerToken, member: member, secrets: secrets, now: now, out: &scratch.checkin) {
        case .success(let changed?):
            if let digest {
                for id in panic.cutMember(digest, of: circle, out: &scratch.panic) { replication?.watchersChanged(id) }
            }
            return Outcome(.ok, record: .circlePut(changed), undo: streams.isEmpty ? .circle(before) : .memberRevoked(before, streams: streams))
        case .success(nil):
            return Outcome(.ok)  // not a live member: nothing changed, nothing to journal
        case .failure(let failure):
            return Outcome(.error(.from(failure)))
        }
    }

    /// Counted against the caller's address (circles created per hour) and the server's capacity.
    private func createCircle(labels: [String?], caller: Caller, now: Int64) -> Outcome {
        if let refused = admit(budgets.admitCircleCreate(caller.address, now: caller.monotonicMs), rate: .addressCircleCreates) {
            return refused
        }
        switch checkin.create(owner: caller.fd, labels: labels, secrets: secrets, now: now) {
        case .success(let created):
            let id = created.circle.id
            return Outcome(.checkin(.created(created.circle, ownerToken: created.ownerToken, memberTokens: created.memberTokens,
                                             settings: checkin.settings)),
                           record: .circlePut(created.circle),
                           undo: .circle(CheckinHub.Checkpoint.created(id)))
        case .failure(let failure):
            if failure == .capacityExceeded { stats.refused(.checkinCapacity) }
            return Outcome(.error(.from(failure)))
        }
    }

    /// `ok` for a change that may have been none: journaled when the circle changed.
    private static func okIfChanged(_ result: Result<CheckinCircle?, CheckinFailure>, _ before: CheckinHub.Checkpoint) -> Outcome {
        switch result {
        case .success(let changed?): return Outcome(.ok, record: .circlePut(changed), undo: .circle(before))
        case .success(nil): return Outcome(.ok)
        case .failure(let failure): return Outcome(.error(.from(failure)))
        }
    }

    /// A subscription the server could not use, refused before the circle is looked at (it says
    /// nothing of the circle): a channel not configured (`unsupported`), an endpoint the daemon
    /// may not POST to or a key that is not a point of P-256 (`invalid_push`). The endpoint's
    /// address is judged again when a notice is sent (private addresses, docs/design/alerts.md).
    /// Messages never echo the values.
    func refuseUnusable(_ target: CheckinSubscription.Target) -> Outcome? {
        switch target {
        case .webPush(let endpoint, let p256dh, _):
            guard alertChannels.webPush else {
                return Outcome(.error(RequestError("unsupported", field: "push", "this server sends no Web Push (no push.vapid_key_file)")))
            }
            do {
                _ = try PushEndpoint(endpoint, allowLoopbackHTTP: alertChannels.allowLoopbackHTTP)
            } catch {
                let why: String
                switch error {
                case .schemeNotAllowed: why = alertChannels.allowLoopbackHTTP ? "https (or http to a loopback host)" : "https"
                default: why = "a URL: https://HOST[:PORT]/PATH, without user information or fragment"
                }
                return Outcome(.error(RequestError("invalid_push", field: "push.endpoint", "push.endpoint must be \(why)")))
            }
            guard (try? P256PublicKey(bytes: p256dh)) != nil else {
                return Outcome(.error(RequestError("invalid_push", field: "push.keys.p256dh", "push.keys.p256dh is not a point of P-256")))
            }
            return nil
        case .relay:
            guard alertChannels.relay else {
                return Outcome(.error(RequestError("unsupported", field: "relay", "this server has no webhook relay (no push.relay_url)")))
            }
            return nil
        }
    }

    private static func checkinReply(_ result: Result<CheckinReply, CheckinFailure>) -> Outcome {
        switch result {
        case .success(let reply): return Outcome(.checkin(reply))
        case .failure(let failure): return Outcome(.error(.from(failure)))
        }
    }
}
