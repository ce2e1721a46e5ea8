#if canImport(FoundationEssentials)
    import Dispatch
    import FoundationEssentials
    #if canImport(Glibc)
        import Glibc
    #endif
#else
    import Foundation
#endif

extension SignalProducer where Value == Date, Error == Never {
    /// Sends the scheduler's date every `interval`, starting one interval after the start,
    /// until disposed. The leeway is 10% of the interval.
    ///
    /// - Precondition: `interval` is positive and finite (not `.never`).
    public static func timer(interval: DispatchTimeInterval, on scheduler: any DateScheduler) -> SignalProducer<
        Value, Error
    > {
        _checkInterval(interval, "timer(interval:on:)", .positive)
        return timer(interval: interval, on: scheduler, leeway: .nanoseconds(interval.nanoseconds / 10))
    }

    /// Sends the scheduler's date every `interval`, starting one interval after the start,
    /// until disposed; each tick may come up to `leeway` late.
    ///
    /// - Precondition: `interval` is positive and finite (not `.never`); `leeway` is finite and
    ///   not negative.
    public static func timer(
        interval: DispatchTimeInterval, on scheduler: any DateScheduler, leeway: DispatchTimeInterval
    ) -> SignalProducer<Value, Error> {
        _checkInterval(interval, "timer(interval:on:leeway:)", .positive)
        _checkInterval(leeway, "timer(interval:on:leeway:)", .nonNegative, argument: "leeway")
        return SignalProducer { observer, lifetime in
            lifetime += scheduler.schedule(after: interval, interval: interval, leeway: leeway) {
                observer.send(value: scheduler.currentDate)
            }
        }
    }
}

extension SignalProducer where Error == Never {
    /// Sends the elements of `values`, one every `interval` (the first after one interval),
    /// then completes.
    ///
    /// - Precondition: `interval` is positive and finite (not `.never`).
    public static func interval<S: Sequence>(
        _ values: S, interval: DispatchTimeInterval, on scheduler: any DateScheduler
    ) -> SignalProducer<S.Element, Error> where Value == S.Element {
        _checkInterval(interval, "interval(_:interval:on:)", .positive)
        return SignalProducer<S.Element, Error> { observer, lifetime in
            var iterator = values.makeIterator()  // Used on the scheduler's thread only.
            let ticks = SerialDisposable()
            lifetime += ticks
            ticks.inner = scheduler.schedule(after: interval, interval: interval, leeway: .seconds(0)) {
                if let value = iterator.next() {
                    observer.send(value: value)
                } else {
                    ticks.dispose()
                    observer.sendCompleted()
                }
            }
        }
    }
}

extension SignalProducer where Value == Int, Error == Never {
    /// Sends 0, 1, 2, … one every `interval` (the first after one interval), until disposed.
    ///
    /// - Precondition: `interval` is positive and finite (not `.never`).
    public static func interval(_ interval: DispatchTimeInterval, on scheduler: any DateScheduler) -> SignalProducer<
        Value, Error
    > {
        _checkInterval(interval, "interval(_:on:)", .positive)
        return .interval(0..., interval: interval, on: scheduler)
    }
}
