import CLibUV
import ReactiveLoopCore

#if canImport(Glibc)
    import Glibc
#endif

/// An IPv4 or IPv6 socket address: a numeric host and a port.
public struct SocketAddress: Sendable, Hashable, CustomStringConvertible {
    /// Large enough for both families; `sin6_family` (the common first field) tells which.
    private var storage = sockaddr_in6()

    /// The address family.
    public enum Family: Sendable, Hashable {
        /// IPv4 (`AF_INET`).
        case ipv4
        /// IPv6 (`AF_INET6`).
        case ipv6
    }

    /// The address of `host`, a numeric IPv4 (`"127.0.0.1"`) or IPv6 (`"::1"`) address, on
    /// `port`. Names are not resolved.
    ///
    /// - Throws: `UVError` (`EINVAL`) naming `host` if it is neither.
    /// - Precondition: `port` is in `0...65535` (0 asks the system for a free port when binding).
    public init(host: String, port: Int) throws(UVError) {
        _require((0...65535).contains(port), "SocketAddress(host:port:): port must be in 0...65535, got \(port)")
        let status: Int32 =
            if host.contains(":") {
                uv_ip6_addr(host, Int32(port), &storage)
            } else {
                withUnsafeMutableBytes(of: &storage) { bytes in
                    uv_ip4_addr(host, Int32(port), bytes.baseAddress!.assumingMemoryBound(to: sockaddr_in.self))
                }
            }
        if status < 0 {
            throw UVError(
                code: status, operation: "SocketAddress(host: \"\(host)\", port: \(port)): not a numeric IP address")
        }
    }

    /// The address in `address` (a `sockaddr_in` or `sockaddr_in6`), or nil for another family.
    init?(_ address: UnsafePointer<sockaddr>) {
        switch Int32(address.pointee.sa_family) {
        case AF_INET:
            withUnsafeMutableBytes(of: &storage) { bytes in
                bytes.copyMemory(from: UnsafeRawBufferPointer(start: address, count: MemoryLayout<sockaddr_in>.size))
            }
        case AF_INET6:
            storage = UnsafeRawPointer(address).load(as: sockaddr_in6.self)
        default:
            return nil
        }
    }

    /// The address family.
    public var family: Family { Int32(storage.sin6_family) == AF_INET6 ? .ipv6 : .ipv4 }

    /// The numeric host, such as `"127.0.0.1"` or `"::1"`.
    public var host: String {
        var name = [UInt8](repeating: 0, count: 64)
        withUnsafePointer { address in
            _ = name.withUnsafeMutableBufferPointer { buffer in
                buffer.withMemoryRebound(to: CChar.self) { uv_ip_name(address, $0.baseAddress, $0.count) }
            }
        }
        return String(decoding: name.prefix { $0 != 0 }, as: UTF8.self)
    }

    /// The port.
    public var port: Int { Int(UInt16(bigEndian: storage.sin6_port)) }

    /// `"127.0.0.1:8125"` or `"[::1]:8125"`.
    public var description: String { family == .ipv6 ? "[\(host)]:\(port)" : "\(host):\(port)" }

    /// Calls `body` with the address as a `sockaddr` pointer.
    public func withUnsafePointer<Result>(_ body: (UnsafePointer<sockaddr>) throws -> Result) rethrows -> Result {
        try Swift.withUnsafeBytes(of: storage) { bytes in
            try body(bytes.baseAddress!.assumingMemoryBound(to: sockaddr.self))
        }
    }

    public static func == (lhs: SocketAddress, rhs: SocketAddress) -> Bool {
        lhs.family == rhs.family && lhs.port == rhs.port && lhs.host == rhs.host
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(family)
        hasher.combine(port)
        hasher.combine(host)
    }

    /// The address of a handle, read with `uv_tcp_getsockname` and the like.
    static func read(
        _ operation: String, _ get: (UnsafeMutablePointer<sockaddr>, UnsafeMutablePointer<Int32>) -> Int32
    ) throws(UVError) -> SocketAddress {
        var raw = sockaddr_storage()
        var length = Int32(MemoryLayout<sockaddr_storage>.size)
        let status = withUnsafeMutableBytes(of: &raw) { bytes in
            get(bytes.baseAddress!.assumingMemoryBound(to: sockaddr.self), &length)
        }
        try UVError.check(status, operation)
        let address = withUnsafeBytes(of: &raw) { bytes in
            SocketAddress(bytes.baseAddress!.assumingMemoryBound(to: sockaddr.self))
        }
        guard let address else { throw UVError(code: Int32(UV_EAFNOSUPPORT.rawValue), operation: operation) }
        return address
    }
}
