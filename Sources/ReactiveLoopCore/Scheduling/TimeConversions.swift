// Conversions between the time types of the API (DispatchTimeInterval, TimeInterval) and the
// exact Duration the schedulers' clocks keep.

import Dispatch
#if canImport(FoundationEssentials)
    import Dispatch
    import FoundationEssentials
    #if canImport(Glibc)
        import Glibc
    #endif
#else
    import Foundation
#endif

extension DispatchTimeInterval {
    /// The interval in seconds; `.never` is infinite.
    @usableFromInline
    var timeInterval: TimeInterval {
        switch self {
        case let .seconds(value): return TimeInterval(value)
        case let .milliseconds(value): return TimeInterval(value) / 1_000
        case let .microseconds(value): return TimeInterval(value) / 1_000_000
        case let .nanoseconds(value): return TimeInterval(value) / 1_000_000_000
        case .never: return .infinity
        @unknown default: return .infinity
        }
    }

    /// The interval in whole nanoseconds (saturating); `.never` is `Int.max`.
    @usableFromInline
    package var nanoseconds: Int {
        switch self {
        case let .seconds(value):
            return value.multipliedReportingOverflow(by: 1_000_000_000).overflow ? .max : value * 1_000_000_000
        case let .milliseconds(value):
            return value.multipliedReportingOverflow(by: 1_000_000).overflow ? .max : value * 1_000_000
        case let .microseconds(value):
            return value.multipliedReportingOverflow(by: 1_000).overflow ? .max : value * 1_000
        case let .nanoseconds(value): return value
        case .never: return .max
        @unknown default: return .max
        }
    }

    /// An interval of `seconds`, rounded to the nanosecond.
    @usableFromInline
    static func from(seconds: TimeInterval) -> DispatchTimeInterval {
        guard seconds.isFinite else { return .never }
        let nanoseconds = (seconds * 1_000_000_000).rounded()
        return .nanoseconds(nanoseconds >= Double(Int.max) ? .max : max(0, Int(nanoseconds)))
    }
}

extension DispatchTimeInterval {
    /// The interval as an exact `Duration`, or `nil` for `.never`.
    var duration: Duration? {
        switch self {
        case let .seconds(value): .seconds(value)
        case let .milliseconds(value): .milliseconds(value)
        case let .microseconds(value): .microseconds(value)
        case let .nanoseconds(value): .nanoseconds(value)
        case .never: nil
        @unknown default: nil
        }
    }
}

extension Duration {
    /// The duration in seconds, correctly rounded for whole nanoseconds.
    var seconds: Double {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }

    /// `seconds` (finite) rounded to the nanosecond, the resolution of the schedulers' clocks.
    static func rounded(seconds: Double) -> Duration {
        let whole = seconds.rounded(.down)
        return .seconds(Int64(whole)) + .nanoseconds(Int64(((seconds - whole) * 1e9).rounded()))
    }
}
