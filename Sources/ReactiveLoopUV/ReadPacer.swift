/// When a `UDPSocket`'s reading pauses (its `readPause`), as arithmetic on the times and counts
/// the socket gives it, so that tests drive it with times of their own.
///
/// The socket calls `read()` for each datagram and `foundEmpty(at:)` when a read finds the
/// receive buffer empty or a batch of reads leaves it so. Datagrams are counted over windows
/// of at least the pause: at the first empty buffer after a window's end, reading starts
/// pausing if the window's datagrams came at `datagramsPerPause` or more per pause, and stops
/// pausing otherwise. While pausing, every empty buffer starts a pause. A pause costs wake-ups
/// and system calls of its own (a timer, the descriptor taken out of the poll and put back),
/// which fewer datagrams would not repay; windows at least a pause long judge bursts by what
/// they add up to, not by the gap between two datagrams of one burst.
///
/// The pause taken (`current`) starts at the pause as set, halves (down to 1/64 of it) after
/// a pause that left the receive buffer a quarter full or more, and doubles back after one
/// that left it under a sixteenth full (`pauseEnded(queued:limit:)`), so that a pause does not
/// fill the buffer. Whether to pause is judged against the pause as set, so a shortened pause
/// grows back whenever datagrams come fast.
struct _ReadPacer {
    /// Datagrams per pause (at the rate of the last window) from which reading pauses.
    static let datagramsPerPause: UInt64 = 8

    /// The pause as set, in nanoseconds; 0: never.
    private(set) var pause: UInt64
    /// The pause taken now, in nanoseconds: `pause`, or less while pauses fill the buffer.
    var current: UInt64
    /// Whether the last window's datagrams came fast enough to pause.
    private(set) var pausing = false
    // The start of the current window (monotonic nanoseconds; 0: the run's first empty buffer
    // is still to come), and the datagrams read since.
    private var windowStart: UInt64 = 0
    private var windowCount: UInt64 = 0

    init(pause: UInt64) {
        self.pause = pause
        current = pause
    }

    /// Changes the pause (0: never), from the next empty buffer on.
    mutating func set(pause: UInt64) {
        guard pause != self.pause else { return }
        (self.pause, current) = (pause, pause)
        if pause == 0 { pausing = false }
    }

    /// A run starts: its first empty buffer opens the first window.
    mutating func startRun() {
        (windowStart, windowCount, pausing) = (0, 0, false)
    }

    /// A datagram was read.
    @inline(__always)
    mutating func read() { windowCount &+= 1 }

    /// The receive buffer was found empty at `now`: the pause to take, in nanoseconds, or nil
    /// to read on.
    mutating func foundEmpty(at now: UInt64) -> UInt64? {
        guard pause != 0 else { return nil }
        guard windowStart != 0 else {
            (windowStart, windowCount) = (now, 0)
            return nil
        }
        let elapsed = now &- windowStart
        if elapsed >= pause {
            // At most 2^20 datagrams and 2^62 ns: the products stay below 2^64.
            pausing =
                elapsed < 1 << 60 && Swift.min(windowCount, 1 << 20) * pause >= Self.datagramsPerPause * elapsed
            (windowStart, windowCount) = (now, 0)
        }
        return pausing ? current : nil
    }

    /// A pause ended with `queued` bytes in the receive buffer, which may hold `limit`.
    mutating func pauseEnded(queued: UInt32, limit: UInt32) {
        if queued >= limit / 4 {
            current = Swift.max(current / 2, Swift.max(pause / 64, 1))
        } else if queued < limit / 16 {
            current = Swift.min(current * 2, pause)
        }
    }
}
