import ReactiveLoop

/// A signal made with `Signal.init(_:)` whose generator records when its lifetime ends. The
/// recorder keeps the input observer, so that releasing the input does not end the signal.
public final class EndRecordingSignal<Value>: @unchecked Sendable {  // `input` is set once, in `make()`.
    /// The signal's input, once `make()` has run.
    public private(set) var input: Signal<Value, Never>.Observer?
    /// Whether the generator's lifetime has ended.
    public let ended = Box(false)

    public init() {}

    /// Makes the signal; hold it no longer than the test needs it.
    public func make() -> Signal<Value, Never> {
        Signal { [self] observer, lifetime in
            input = observer
            lifetime.observeEnded { [ended] in ended.value = true }
        }
    }
}
