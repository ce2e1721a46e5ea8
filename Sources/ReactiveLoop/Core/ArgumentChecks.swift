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
