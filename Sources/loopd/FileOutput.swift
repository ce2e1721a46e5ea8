#if canImport(Glibc)
    import Glibc
#endif

/// The JSON-lines output: a file opened for appending (reopened on SIGHUP, for log rotation),
/// or standard output.
///
/// Confined to the flush queue once the daemon runs.
final class FileOutput: @unchecked Sendable {  // Confined to the flush queue (see above).
    let path: String
    private var fd: Int32

    /// Opens `path` for appending, creating it if need be; `-` is standard output.
    init(path: String) throws(Daemon.StartupError) {
        self.path = path
        if path == "-" {
            fd = 1
        } else {
            fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0o644)
            if fd < 0 {
                throw Daemon.StartupError(
                    description: "--output \(path): cannot open for writing: \(String(cString: strerror(errno)))")
            }
        }
    }

    deinit { if fd > 2 { close(fd) } }

    /// Writes all of `bytes`; returns a message on failure.
    func write(_ bytes: [UInt8]) -> String? {
        bytes.withUnsafeBytes { buffer -> String? in
            var offset = 0
            while offset < buffer.count {
                let written = Glibc.write(fd, buffer.baseAddress! + offset, buffer.count - offset)
                if written < 0 {
                    if errno == EINTR { continue }
                    return "--output \(path): write failed: \(String(cString: strerror(errno)))"
                }
                offset += written
            }
            return nil
        }
    }

    /// Reopens the file (after it was renamed by a log rotation); returns a message on
    /// failure, and keeps writing to the old file then.
    func reopen() -> String? {
        guard path != "-" else { return nil }
        let reopened = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0o644)
        guard reopened >= 0 else {
            return "--output \(path): cannot reopen: \(String(cString: strerror(errno))); still writing to the old file"
        }
        close(fd)
        fd = reopened
        return nil
    }
}
