/// Represents how long an object or an operation lives. When it ends, everything attached to it
/// with `+=` or `observeEnded` is disposed or run, in the order attached.
///
/// A lifetime ends when its `Token` is disposed or released. Bind work to an object by storing
/// the token in that object: when the object goes away, the work stops.
public final class Lifetime {
    @usableFromInline let disposables: CompositeDisposable

    /// Whether the lifetime has ended.
    public var hasEnded: Bool { disposables.isDisposed }

    /// A signal that completes when the lifetime ends, or that is already completed.
    public var ended: Signal<Never, Never> {
        Signal { observer, _ in
            if self.observeEnded(observer.sendCompleted) == nil { observer.sendCompleted() }
        }
    }

    @usableFromInline
    init(_ disposables: CompositeDisposable) {
        self.disposables = disposables
    }

    /// Creates a lifetime that ends with `token`.
    public convenience init(_ token: Token) {
        self.init(token.disposables)
    }

    /// Creates a lifetime and the token that ends it.
    public static func make() -> (lifetime: Lifetime, token: Token) {
        let token = Token()
        return (Lifetime(token), token)
    }

    /// A lifetime that has already ended.
    public static let empty: Lifetime = {
        let disposables = CompositeDisposable()
        disposables.dispose()
        return Lifetime(disposables)
    }()

    /// Runs `action` when the lifetime ends; if it has already ended, runs it now.
    ///
    /// - Returns: A disposable that cancels the observation, or `nil` if the lifetime had
    ///   already ended.
    @discardableResult
    public func observeEnded(_ action: @escaping () -> Void) -> (any Disposable)? {
        disposables.add(action)
    }

    /// Disposes `disposable` when the lifetime ends (at once if it has ended).
    @discardableResult
    public static func += (lifetime: Lifetime, disposable: (any Disposable)?) -> (any Disposable)? {
        lifetime.disposables.add(disposable)
    }

    /// Ends a lifetime when disposed or released.
    public final class Token {
        @usableFromInline let disposables = CompositeDisposable()

        /// Creates a token, and with it a lifetime that has not ended.
        public init() {}

        deinit { disposables.dispose() }

        /// Ends the lifetime now.
        public func dispose() { disposables.dispose() }
    }
}

extension Lifetime: @unchecked Sendable {}  // Immutable; CompositeDisposable is thread safe.
extension Lifetime.Token: @unchecked Sendable {}  // Immutable; CompositeDisposable is thread safe.
