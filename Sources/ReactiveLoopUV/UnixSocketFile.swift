import CLibUV

#if canImport(Glibc)
    import Glibc
#endif

/// The file of a Unix socket bound to a path: made with the socket's mode, a stale one (a socket
/// nobody listens on, left by a process that is gone) removed first, and removed at close only
/// if the path still names it.
struct _UnixSocketFile {
    let path: String
    private let device: dev_t
    private let inode: ino_t

    /// The socket address of `path`.
    ///
    /// - Throws: `ENAMETOOLONG` for an empty path, one with a NUL, or one longer than a socket
    ///   address holds (107 bytes).
    static func address(of path: String, _ operation: String) throws(UVError) -> sockaddr_un {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard !bytes.isEmpty, bytes.count < MemoryLayout.size(ofValue: address.sun_path), !bytes.contains(0) else {
            throw UVError(
                code: Int32(UV_ENAMETOOLONG.rawValue),
                operation: "\(operation): not a usable socket path (1 to 107 bytes, no NUL)")
        }
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: bytes) }
        return address
    }

    /// A new non-blocking socket of `type` (`SOCK_DGRAM`, `SOCK_STREAM`) bound to `path`, its
    /// file given `mode`, and the file. The caller owns the descriptor.
    ///
    /// - Throws: `UVError`: see `address(of:_:)`; `EACCES` if a socket this user may not connect to is there, `EADDRINUSE` if a socket someone may be using
    ///   is at `path`, `EEXIST` if a file that is not a socket is there, or the system's error
    ///   from `socket`, `bind` or `chmod`.
    static func bind(_ path: String, type: Int32, mode: UInt32, _ operation: String) throws(UVError) -> (
        descriptor: Int32, file: _UnixSocketFile
    ) {
        var address = try address(of: path, operation)
        try removeStale(path, address, operation)
        let fd = socket(AF_UNIX, type | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw UVError(code: -errno, operation: "\(operation): socket") }
        func fail(_ what: String, unlinking: Bool) -> UVError {
            let error = UVError(code: -errno, operation: "\(operation): \(what)")
            Glibc.close(fd)
            if unlinking { unlink(path) }
            return error
        }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard bound == 0 else { throw fail("bind", unlinking: false) }
        guard chmod(path, mode_t(mode)) == 0 else { throw fail("chmod \(String(mode, radix: 8))", unlinking: true) }
        var created = stat()
        guard lstat(path, &created) == 0 else { throw fail("lstat", unlinking: true) }
        return (fd, _UnixSocketFile(path: path, device: created.st_dev, inode: created.st_ino))
    }

    /// Removes the file, if the path still names this socket: another may have taken the path
    /// since (the file removed and replaced), and it is not this socket's to remove.
    func remove() {
        var now = stat()
        if lstat(path, &now) == 0 && now.st_dev == device && now.st_ino == inode { unlink(path) }
    }

    /// Removes a socket file nobody listens on; throws for a live socket or another file.
    private static func removeStale(_ path: String, _ address: sockaddr_un, _ operation: String) throws(UVError) {
        var status = stat()
        guard lstat(path, &status) == 0 else { return }  // Nothing there.
        guard status.st_mode & S_IFMT == S_IFSOCK else {
            throw UVError(
                code: Int32(UV_EEXIST.rawValue), operation: "\(operation): a file that is not a socket is there")
        }
        // A socket left by a process that is gone refuses a connect (ECONNREFUSED), whatever
        // the type asked. A live socket of the other type answers EPROTOTYPE: the probe tries
        // the other type then. A socket this user may not write to (EACCES) cannot be told
        // stale or live: it is refused as such. Any other answer (a connect, EAGAIN for a full
        // backlog) is a socket someone may be using.
        for type in [SOCK_DGRAM, SOCK_STREAM] {
            let probe = socket(
                AF_UNIX, Int32(type.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            var address = address
            let connected = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    connect(probe, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
                }
            }
            let answer = connected == 0 ? 0 : errno
            Glibc.close(probe)
            if answer == ECONNREFUSED { break }
            if answer == EPROTOTYPE && type == SOCK_DGRAM { continue }
            if answer == EACCES {
                throw UVError(
                    code: Int32(UV_EACCES.rawValue),
                    operation: "\(operation): a socket is there that this user may not connect to, so cannot tell stale"
                )
            }
            throw UVError(code: Int32(UV_EADDRINUSE.rawValue), operation: "\(operation): a socket in use is there")
        }
        unlink(path)
    }
}
