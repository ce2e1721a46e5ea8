/// How `flatten` and `flatMap` run the inner streams of a stream of streams.
///
/// In every strategy a failure of the outer stream or of a running inner stream fails the
/// result, an interruption of either interrupts it, and ending the result (by disposal or a
/// terminal event) disposes every running inner stream.
public struct FlattenStrategy: Sendable {
    @usableFromInline
    enum Kind: Sendable, Equatable {
        case concurrent(limit: UInt)
        case latest
        case race
        case throttle
    }

    @usableFromInline let kind: Kind

    @usableFromInline
    init(kind: Kind) { self.kind = kind }

    /// Runs every inner stream as soon as it arrives and forwards all their values. Completes
    /// when the outer stream and every inner stream have completed.
    public static let merge = FlattenStrategy(kind: .concurrent(limit: .max))

    /// Runs one inner stream at a time, in arrival order; the others wait. Completes when the
    /// outer stream and every inner stream have completed.
    public static let concat = FlattenStrategy(kind: .concurrent(limit: 1))

    /// Runs at most `limit` inner streams at once; the others wait in arrival order.
    ///
    /// - Precondition: `limit > 0`.
    public static func concurrent(limit: UInt) -> FlattenStrategy {
        _require(limit > 0, "FlattenStrategy.concurrent(limit:): limit must be > 0, got \(limit)")
        return FlattenStrategy(kind: .concurrent(limit: limit))
    }

    /// Runs only the newest inner stream: a new one disposes the one before it. Completes when
    /// the outer stream and the newest inner stream have completed.
    public static let latest = FlattenStrategy(kind: .latest)

    /// The first inner stream to send an event wins: every other one is disposed, and inner
    /// streams arriving later are ignored.
    public static let race = FlattenStrategy(kind: .race)

    /// Runs one inner stream at a time and drops inner streams that arrive while it runs.
    public static let throttle = FlattenStrategy(kind: .throttle)
}
