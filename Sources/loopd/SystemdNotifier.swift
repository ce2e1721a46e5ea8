#if canImport(Glibc)
    import Glibc
#endif

/// systemd's service notifications (the `sd_notify` protocol, without libsystemd): datagrams of
/// `KEY=value` lines to the socket named by `NOTIFY_SOCKET`, which systemd sets for a
/// `Type=notify` service. loopd sends `READY=1` once its sockets are open and its flush timer
/// runs, `WATCHDOG=1` from its loop thread at half of `WATCHDOG_USEC` (so a loop that stops
/// turning stops the pings, and systemd restarts loopd), and `STOPPING=1` at SIGTERM.
struct SystemdNotifier {
    /// The socket's address, and its length (`sun_path` may start with a NUL: an abstract one).
    private let address: sockaddr_un
    private let length: socklen_t
    private let descriptor: Int32
    /// Microseconds between the pings systemd expects (`WATCHDOG_USEC`), if it expects them from
    /// this process (`WATCHDOG_PID`, when set, names it).
    let watchdogMicroseconds: UInt64?

    /// The notifier `NOTIFY_SOCKET` asks for, or nil when loopd does not run under systemd (or
    /// the variable names no socket loopd can use: it then runs as if it were not).
    static func fromEnvironment() -> SystemdNotifier? {
        guard let raw = getenv("NOTIFY_SOCKET") else { return nil }
        var path = Array(String(cString: raw).utf8)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        guard let first = path.first, first == UInt8(ascii: "/") || first == UInt8(ascii: "@") else { return nil }
        let abstract = first == UInt8(ascii: "@")
        // A path needs its terminating NUL; an abstract name does not.
        guard path.count < capacity || (abstract && path.count == capacity) else { return nil }
        if abstract { path[0] = 0 }
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: path) }
        let length = socklen_t(MemoryLayout<sockaddr_un>.offset(of: \.sun_path)! + path.count + (abstract ? 0 : 1))
        // Non-blocking: a notification systemd does not take (its queue full) is lost, never a
        // loop thread stuck in sendto.
        let descriptor = socket(
            AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        guard descriptor >= 0 else { return nil }
        var watchdog: UInt64?
        if let usec = getenv("WATCHDOG_USEC").flatMap({ UInt64(String(cString: $0)) }), usec > 0 {
            let pid = getenv("WATCHDOG_PID").flatMap { Int32(String(cString: $0)) }
            if pid == nil || pid == getpid() { watchdog = usec }
        }
        return SystemdNotifier(address: address, length: length, descriptor: descriptor, watchdogMicroseconds: watchdog)
    }

    /// Sends `state` (`READY=1`, `STOPPING=1`, … lines); false if the socket refused it.
    @discardableResult
    func notify(_ state: String) -> Bool {
        var address = self.address
        var state = state
        return state.withUTF8 { bytes in
            withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    sendto(descriptor, bytes.baseAddress, bytes.count, Int32(MSG_NOSIGNAL), $0, length) == bytes.count
                }
            }
        }
    }
}
