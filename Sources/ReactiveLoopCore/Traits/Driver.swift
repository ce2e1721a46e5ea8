/// A stream for view models, after RxSwift's `Driver`: it never fails, delivers on one
/// scheduler (`MainScheduler` unless told otherwise), and shares one run of its source among
/// all its observers, replaying the latest value to each new one.
///
/// ```swift
/// let status: Driver<String> = client.status.asDriver(onErrorJustReturn: "offline")
/// label.text <~ status
/// ```
///
/// The source starts when the first observer starts the driver and is not restarted: every
/// later observer gets the latest value at once (on its own thread, as it starts), then the
/// values that follow, on the driver's scheduler. The run lives as long as the driver's
/// producer is held or observed, as with `replayLazily(upTo:)`.
public struct Driver<Value>: SignalProducerConvertible, BindingSource {
    /// The shared, replaying producer.
    public let producer: SignalProducer<Value, Never>

    /// A driver over `source`, which must not fail: its values are delivered on `scheduler`
    /// and shared among all observers, with the latest one replayed.
    public init(_ source: SignalProducer<Value, Never>, on scheduler: any Scheduler = MainScheduler()) {
        producer = source.observe(on: scheduler).replayLazily(upTo: 1)
    }
}

extension Driver: @unchecked Sendable {}  // Immutable; the producer is thread safe.

extension SignalProducer {
    /// A driver that ends with `fallback` instead of failing; see `Driver`.
    ///
    /// - Parameters:
    ///   - fallback: Sent in place of the failure, then the driver completes.
    ///   - scheduler: Where the driver delivers; `MainScheduler` by default.
    public func asDriver(onErrorJustReturn fallback: Value, on scheduler: any Scheduler = MainScheduler()) -> Driver<
        Value
    > {
        Driver(flatMapError { _ in SignalProducer<Value, Never>(value: fallback) }, on: scheduler)
    }

    /// A driver that continues with `recovery`'s values instead of failing; see `Driver`.
    public func asDriver(
        onErrorDriveWith recovery: @escaping (Error) -> SignalProducer<Value, Never>,
        on scheduler: any Scheduler = MainScheduler()
    ) -> Driver<Value> {
        Driver(flatMapError(recovery), on: scheduler)
    }
}

extension SignalProducer where Error == Never {
    /// This producer as a driver; see `Driver`.
    public func asDriver(on scheduler: any Scheduler = MainScheduler()) -> Driver<Value> {
        Driver(self, on: scheduler)
    }
}

extension Signal where Error == Never {
    /// This signal's values from the driver's first observer on, as a driver; see `Driver`.
    public func asDriver(on scheduler: any Scheduler = MainScheduler()) -> Driver<Value> {
        Driver(SignalProducer(self), on: scheduler)
    }
}

extension PropertyProtocol {
    /// The property's current value, then its changes, as a driver; see `Driver`.
    public func asDriver(on scheduler: any Scheduler = MainScheduler()) -> Driver<Value> {
        Driver(producer, on: scheduler)
    }
}
