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

/// Stops the program with `message` unless `condition` holds, in release builds too.
///
/// For argument checks, which are on cold paths: `precondition` drops its message under `-O`,
/// and a user who passed a bad argument deserves to read which API, which argument and which
/// value. The message names all three (`"take(first:): count must be >= 0, got -1"`).
///
/// Package access: the runtime module and loopd share it; not part of the API.
@inlinable
package func _require(
    _ condition: Bool, _ message: @autoclosure () -> String, file: StaticString = #fileID, line: UInt = #line
) {
    if _slowPath(!condition) { _argumentFailure(message(), file: file, line: line) }
}

/// Stops the program with `message`, in release builds too.
@usableFromInline @inline(never)
package func _argumentFailure(_ message: String, file: StaticString = #fileID, line: UInt = #line) -> Never {
    fatalError(message, file: file, line: line)
}

// MARK: Time intervals

/// What a time interval argument must be. Every interval check in the package goes through one
/// of these rules, so one rule is worded one way wherever it is broken.
@usableFromInline
package enum _IntervalRule: Sendable {
    /// Finite and >= 0: a delay or a window, where 0 means at once.
    case nonNegative
    /// Finite and > 0: a period, which must move time forward.
    case positive
    /// Finite and > 0, up to `seconds`: a timeout that is turned into nanoseconds.
    case positiveUpTo(Double)
    /// Finite, of either sign: a change of clock.
    case finite
    /// Finite and in `range` seconds: a command-line flag.
    case within(ClosedRange<Double>)

    /// Whether `seconds` keeps the rule; NaN and the infinities keep none.
    package func admits(_ seconds: Double) -> Bool {
        guard seconds.isFinite else { return false }
        switch self {
        case .nonNegative: return seconds >= 0
        case .positive: return seconds > 0
        case let .positiveUpTo(limit): return seconds > 0 && seconds <= limit
        case .finite: return true
        case let .within(range): return range.contains(seconds)
        }
    }

    /// The rule as a message says it: `must be finite and >= 0`.
    package var requirement: String {
        switch self {
        case .nonNegative: "must be finite and >= 0"
        case .positive: "must be positive and finite"
        case let .positiveUpTo(limit): "must be positive and at most \(Self.seconds(limit)) seconds"
        case .finite: "must be finite"
        case let .within(range):
            "must be in \(Self.seconds(range.lowerBound))...\(Self.seconds(range.upperBound)) seconds"
        }
    }

    /// A bound as people write it: `86400`, not `86400.0`.
    private static func seconds(_ value: Double) -> String {
        value.rounded() == value && abs(value) < 1e15 ? String(Int(value)) : String(value)
    }
}

/// What is wrong with an interval, or nil if it keeps `rule`: `interval must be finite and >= 0,
/// got nan`. Validators that throw rather than stop (loopd's flags) word their errors with it.
///
/// - Parameters:
///   - argument: The argument's name as the caller knows it (`interval`, `--flush-interval`).
///   - shown: The value as the caller wrote it, if not `seconds` (`never`, `seconds(-1)`).
package func _intervalProblem(
    _ argument: String, _ seconds: Double, _ rule: _IntervalRule, shown: @autoclosure () -> String? = nil
) -> String? {
    // `shown` is evaluated for the message only: describing a `DispatchTimeInterval` goes
    // through reflection (4 million instructions for loopd's first timer), which a check that
    // passes must not pay.
    rule.admits(seconds) ? nil : "\(argument) \(rule.requirement), got \(shown() ?? String(seconds))"
}

/// Stops the program, in release builds too, unless `interval` (in seconds) keeps `rule`; the
/// message names `api`, the argument and the value: `delay(_:on:): interval must be finite and
/// >= 0, got nan`. The default rule is the time operators' (delay, throttle, debounce, timeout,
/// retry): 0 is allowed and means at once.
@usableFromInline
package func _checkInterval(
    _ interval: TimeInterval, _ api: @autoclosure () -> String, _ rule: _IntervalRule = .nonNegative,
    argument: String = "interval", file: StaticString = #fileID, line: UInt = #line
) {
    if let problem = _intervalProblem(argument, interval, rule) {
        _argumentFailure("\(api()): \(problem)", file: file, line: line)
    }
}

/// Stops the program, in release builds too, unless `interval` keeps `rule` (`.never` is
/// infinite, so it keeps none); the message names `api`, the argument and the value:
/// `timer(interval:on:): interval must be positive and finite, got never`.
@usableFromInline
package func _checkInterval(
    _ interval: DispatchTimeInterval, _ api: @autoclosure () -> String, _ rule: _IntervalRule,
    argument: String = "interval", file: StaticString = #fileID, line: UInt = #line
) {
    // `timeInterval` keeps the sign and the finiteness exactly (a nanosecond is 1e-9, not 0).
    if let problem = _intervalProblem(argument, interval.timeInterval, rule, shown: "\(interval)") {
        _argumentFailure("\(api()): \(problem)", file: file, line: line)
    }
}

/// Stops the program, in release builds too, if `date` is NaN: `api: date is NaN`.
package func _checkDate(_ date: Date, _ api: @autoclosure () -> String) {
    _require(!date.timeIntervalSinceReferenceDate.isNaN, "\(api()): date is NaN")
}

/// Checks the arguments of a repeating `schedule(after:interval:leeway:action:)`, the same way
/// on every scheduler: the interval is a period, the leeway may be 0.
package func _checkRepeating(date: Date, interval: DispatchTimeInterval, leeway: DispatchTimeInterval, _ api: String) {
    _checkDate(date, api)
    _checkInterval(interval, api, .positive)
    _checkInterval(leeway, api, .nonNegative, argument: "leeway")
}
