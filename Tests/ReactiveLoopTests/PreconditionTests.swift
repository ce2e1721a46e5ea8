import Testing
@testable import ReactiveLoopCore

/// Bad arguments stop the program with a message that names the API, the argument and the value.
@Suite("Preconditions")
struct PreconditionTests {
    @Test func takeFirstWithANegativeCountNamesTheAPIArgumentAndValue() async {
        await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            _ = Signal<Int, Never>.never.take(first: -1)
        }.map { result in
            let message = String(decoding: result.standardErrorContent, as: UTF8.self)
            #expect(message.contains("take(first:): count must be >= 0, got -1"))
        }
    }

    @Test func otherCountsAreCheckedToo() async {
        await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            _ = SignalProducer<Int, Never>.never.skip(first: -2)
        }.map { result in
            let message = String(decoding: result.standardErrorContent, as: UTF8.self)
            #expect(message.contains("skip(first:): count must be >= 0, got -2"))
        }
        await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            _ = SignalProducer<Int, Never>.never.take(last: -3)
        }.map { result in
            let message = String(decoding: result.standardErrorContent, as: UTF8.self)
            #expect(message.contains("take(last:): count must be >= 0, got -3"))
        }
        await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            _ = FlattenStrategy.concurrent(limit: 0)
        }.map { result in
            let message = String(decoding: result.standardErrorContent, as: UTF8.self)
            #expect(message.contains("FlattenStrategy.concurrent(limit:): limit must be > 0, got 0"))
        }
    }
}
