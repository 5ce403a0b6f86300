/// How the owner and the members are reached when they are not connected (`checkin.register`,
/// `checkin.unregister`; docs/design/alerts.md, "Subscriptions").
///
/// Either token will do, and a subscription belongs to whoever's token registered it: a member
/// removes only its own, and so does the owner. Registering a destination the holder holds already
/// (the same endpoint, or the same handle) is the same subscription: its keys are replaced and its
/// id returned again, so a browser that re-subscribes (`pushsubscriptionchange`) does not make the
/// list grow. A change moves `activeAt`, as every change of a circle does (the replicated log's
/// revision relies on it); registering what is held already, unchanged, changes nothing.
extension CheckinHub {
    /// The caller's subscription to `target`, new or replaced: its id, and the circle when it
    /// changed (nil: the same registration again, nothing to journal).
    public mutating func register(_ id: CircleID, credential: CheckinCredential, target: CheckinSubscription.Target,
                                  secrets: Secrets, now: Int64) -> Result<(subscription: SubscriptionID, circle: CheckinCircle?), CheckinFailure> {
        precondition(target.isWellFormed, "the decoder admits only well-formed targets")
        guard let holder = holder(of: id, credential, secrets: secrets) else { return .failure(.forbidden) }
        let limit = settings.maxSubscriptionsPerHolder
        // Drawn before the circle is borrowed (`withCircle`'s body may not touch the hub); unused
        // when the destination is held already.
        var fresh = SubscriptionID(random: secrets.randomBytes(16))
        while circles[id]?.subscriptions.contains(where: { $0.id == fresh }) == true { fresh = SubscriptionID(random: secrets.randomBytes(16)) }
        return withCircle(id) { circle -> Result<(subscription: SubscriptionID, circle: CheckinCircle?), CheckinFailure> in
            if let index = circle.subscriptions.firstIndex(where: { $0.holder == holder && $0.target.sameDestination(as: target) }) {
                let held = circle.subscriptions[index]
                guard held.target != target else { return .success((held.id, nil)) }
                circle.subscriptions[index].target = target
                circle.activeAt = max(circle.activeAt, now)
                return .success((held.id, circle))
            }
            guard circle.subscriptions.lazy.filter({ $0.holder == holder }).count < limit else { return .failure(.tooManySubscriptions) }
            circle.subscriptions.append(CheckinSubscription(id: fresh, holder: holder, target: target, addedAt: now))
            circle.activeAt = max(circle.activeAt, now)
            return .success((fresh, circle))
        } ?? .failure(.forbidden)
    }

    /// Removes the caller's subscription `subscription`. One the caller does not hold (another's,
    /// removed already, never made, or an id that is not one: nil) is `.success(nil)`: nothing
    /// changed, and the caller learns nothing of others' subscriptions.
    public mutating func unregister(_ id: CircleID, credential: CheckinCredential, subscription: SubscriptionID?,
                                    secrets: Secrets, now: Int64) -> Result<CheckinCircle?, CheckinFailure> {
        guard let holder = holder(of: id, credential, secrets: secrets) else { return .failure(.forbidden) }
        return .success(withCircle(id) { circle -> CheckinCircle? in
            guard let index = circle.subscriptions.firstIndex(where: { $0.id == subscription && $0.holder == holder }) else { return nil }
            circle.subscriptions.remove(at: index)
            circle.activeAt = max(circle.activeAt, now)
            return circle
        } ?? nil)
    }

    /// Who `credential` is in circle `id`: its owner or a live member (nil: a wrong token or no
    /// such circle, one answer). The token is hashed before the circle is looked up.
    func holder(of id: CircleID, _ credential: CheckinCredential, secrets: Secrets) -> CheckinRole? {
        switch credential {
        case .owner(let token):
            let digest = secrets.digest(ofToken: token)
            guard let circle = circles[id], circle.ownerDigest.matches(digest) else { return nil }
            return .owner
        case .member(let token):
            let digest = secrets.digest(ofToken: token)
            return circles[id]?.member(matching: digest).map { .member($0.id) }
        }
    }
}

extension CheckinHub {
    /// Removes subscription `subscription` whoever holds it, because the service behind it said
    /// it is gone for good (404 or 410). The circle afterwards, to journal; nil when it held no
    /// such subscription (removed meanwhile) or is gone.
    public mutating func removeGoneSubscription(_ id: CircleID, _ subscription: SubscriptionID, now: Int64) -> CheckinCircle? {
        withCircle(id) { circle -> CheckinCircle? in
            guard let index = circle.subscriptions.firstIndex(where: { $0.id == subscription }) else { return nil }
            circle.subscriptions.remove(at: index)
            circle.activeAt = max(circle.activeAt, now)
            return circle
        } ?? nil
    }
}
