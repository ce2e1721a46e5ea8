import Foundation
import Testing
@testable import ReactiveLoopCore

@Suite("timer and interval")
struct TimerTests {
    @Test func timerAndIntervalTickOnTheVirtualClock() {
        let scheduler = TestScheduler()
        let dates = Timeline<Date, Never>(scheduler)
        let timer = SignalProducer<Date, Never>.timer(interval: .seconds(1), on: scheduler).start(dates.observer)
        let ints = Timeline<Int, Never>(scheduler)
        let counting = SignalProducer<Int, Never>.interval(.milliseconds(500), on: scheduler).start(ints.observer)
        let letters = Timeline<String, Never>(scheduler)
        SignalProducer<String, Never>.interval(["a", "b"], interval: .seconds(2), on: scheduler).start(letters.observer)
        scheduler.advance(by: 5)
        timer.dispose()
        counting.dispose()
        #expect(dates.entries.count == 6)
        #expect(dates.entries.first?.hasPrefix("1.0:VALUE") == true)
        #expect(ints.entries.prefix(3) == ["0.5:VALUE 0", "1.0:VALUE 1", "1.5:VALUE 2"])
        #expect(
            letters.entries == ["2.0:VALUE a", "4.0:VALUE b", "6.0:COMPLETED"]
                || letters.entries == ["2.0:VALUE a", "4.0:VALUE b"])
        scheduler.advance(by: 2)
        #expect(letters.entries == ["2.0:VALUE a", "4.0:VALUE b", "6.0:COMPLETED"])
    }
}
