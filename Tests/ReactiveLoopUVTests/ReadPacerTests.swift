import Testing

@testable import ReactiveLoopUV

/// When a UDP socket's reading pauses, on made-up times (nanoseconds): the pause is 1,000.
@Suite("Read pacer")
struct ReadPacerTests {
    /// A pacer past a run's first empty buffer, which opened its first window at 1,000.
    func started(pause: UInt64 = 1000) -> _ReadPacer {
        var pacer = _ReadPacer(pause: pause)
        pacer.startRun()
        #expect(pacer.foundEmpty(at: 1000) == nil, "a run's first empty buffer never pauses")
        return pacer
    }

    @Test func eightDatagramsInAWindowOfOnePauseStartPausing() {
        var pacer = started()
        for _ in 0..<8 { pacer.read() }
        #expect(pacer.foundEmpty(at: 2000) == 1000)
        #expect(pacer.pausing)
        // Seven do not.
        var slower = started()
        for _ in 0..<7 { slower.read() }
        #expect(slower.foundEmpty(at: 2000) == nil)
        #expect(!slower.pausing)
    }

    @Test func theRateIsJudgedOverTheWholeWindowNotOneBurst() {
        var pacer = started()
        // A burst of 7 right after the window opened, then quiet: within the window no decision
        // is made, and at its end 7 in 1,010 ns are too few.
        for _ in 0..<7 { pacer.read() }
        #expect(pacer.foundEmpty(at: 1010) == nil)
        #expect(pacer.foundEmpty(at: 2010) == nil)
        // 16 in a window of 2,000 are 8 per pause.
        for _ in 0..<16 { pacer.read() }
        #expect(pacer.foundEmpty(at: 4010) == 1000)
    }

    @Test func whilePausingEveryEmptyBufferPausesUntilAWindowIsSlow() {
        var pacer = started()
        for _ in 0..<20 { pacer.read() }
        #expect(pacer.foundEmpty(at: 2000) == 1000)
        // Within the next window, the decision holds.
        #expect(pacer.foundEmpty(at: 2500) == 1000)
        // A window with 3 datagrams: reading goes on without pauses.
        for _ in 0..<3 { pacer.read() }
        #expect(pacer.foundEmpty(at: 3000) == nil)
        #expect(!pacer.pausing)
        #expect(pacer.foundEmpty(at: 3100) == nil)
    }

    @Test func aPauseThatFillsAQuarterOfTheBufferHalvesTheNextDownToASixtyFourth() {
        var pacer = started(pause: 64_000)
        var lengths: [UInt64] = []
        for _ in 0..<8 {
            pacer.pauseEnded(queued: 250, limit: 1000)
            lengths.append(pacer.current)
        }
        #expect(lengths == [32000, 16000, 8000, 4000, 2000, 1000, 1000, 1000])
        // Between a sixteenth and a quarter: as it was.
        pacer.pauseEnded(queued: 100, limit: 1000)
        #expect(pacer.current == 1000)
        // Under a sixteenth: doubles back, up to the pause as set.
        for _ in 0..<8 { pacer.pauseEnded(queued: 61, limit: 1000) }
        #expect(pacer.current == 64000)
        // The floor is at least 1 ns.
        var tiny = started(pause: 10)
        for _ in 0..<10 { tiny.pauseEnded(queued: 1000, limit: 1000) }
        #expect(tiny.current == 1)
    }

    @Test func aShortenedPauseIsTakenWheneverTheRateWouldPayForTheFullOne() {
        // Shortened to its floor by a burst, then datagrams at 10 per pause as set: the rate is
        // judged against the pause as set, so pauses go on (the short one), and grow back.
        var pacer = started(pause: 64_000)
        for _ in 0..<6 { pacer.pauseEnded(queued: 1000, limit: 1000) }
        #expect(pacer.current == 1000)
        for _ in 0..<10 { pacer.read() }
        #expect(pacer.foundEmpty(at: 1000 + 64_000) == 1000)
        pacer.pauseEnded(queued: 0, limit: 1000)
        #expect(pacer.current == 2000)
    }

    @Test func settingThePauseStartsItAfreshAndZeroNeverPauses() {
        var pacer = started()
        for _ in 0..<20 { pacer.read() }
        #expect(pacer.foundEmpty(at: 2000) == 1000)
        pacer.pauseEnded(queued: 1000, limit: 1000)
        pacer.set(pause: 4000)
        #expect(pacer.pause == 4000 && pacer.current == 4000)
        #expect(pacer.foundEmpty(at: 2100) == 4000, "the window's decision holds")
        pacer.set(pause: 0)
        for _ in 0..<100 { pacer.read() }
        #expect(pacer.foundEmpty(at: 9000) == nil)
        #expect(!pacer.pausing)
    }

    @Test func settingTheSamePauseKeepsTheShortenedOne() {
        // The socket sets the pause at every empty buffer, from the value it was last given.
        var pacer = started()
        pacer.pauseEnded(queued: 1000, limit: 1000)
        #expect(pacer.current == 500)
        pacer.set(pause: 1000)
        #expect(pacer.current == 500)
    }

    @Test func aNewRunStartsWithoutPausing() {
        var pacer = started()
        for _ in 0..<20 { pacer.read() }
        #expect(pacer.foundEmpty(at: 2000) == 1000)
        pacer.startRun()
        #expect(!pacer.pausing)
        #expect(pacer.foundEmpty(at: 2100) == nil)
        #expect(pacer.foundEmpty(at: 2200) == nil)
    }

    @Test func hugeCountsAndTimesDoNotOverflow() {
        var pacer = started(pause: 1_000_000_000)
        for _ in 0..<(1 << 21) { pacer.read() }
        #expect(pacer.foundEmpty(at: 1000 + 1_000_000_000) == 1_000_000_000)
        // A window of about 2^62 ns: too slow, and no trap.
        #expect(pacer.foundEmpty(at: 1 << 62) == nil)
        #expect(pacer.foundEmpty(at: UInt64.max) == nil)
    }
}
