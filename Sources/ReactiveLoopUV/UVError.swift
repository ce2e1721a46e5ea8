import CLibUV

/// A libuv failure: the error code libuv returned, its name and libuv's message.
public struct UVError: Error, Equatable, Hashable, CustomStringConvertible, Sendable {
    /// libuv's error code (a negative `errno` value on Unix, such as `UV_EADDRINUSE`).
    public let code: Int32
    /// What was being done, such as `"uv_udp_bind"`.
    public let operation: String

    /// Creates the error for `code`, returned by `operation`.
    public init(code: Int32, operation: String) {
        self.code = code
        self.operation = operation
    }

    /// libuv's name for the code, such as `"EADDRINUSE"`.
    public var name: String { String(cString: uv_err_name(code)) }

    /// libuv's message for the code, such as `"address already in use"`.
    public var message: String { String(cString: uv_strerror(code)) }

    /// `"<operation>: <NAME> (<message>)"`.
    public var description: String { "\(operation): \(name) (\(message))" }

    /// The loop was stopped: the work was not accepted.
    public static let loopStopped = UVError(code: Int32(UV_ECANCELED.rawValue), operation: "EventLoop (stopped)")

    /// Throws a `UVError` if `result` (a libuv return value) is negative.
    @discardableResult
    static func check(_ result: Int32, _ operation: @autoclosure () -> String) throws(UVError) -> Int32 {
        if result < 0 { throw UVError(code: result, operation: operation()) }
        return result
    }
}
