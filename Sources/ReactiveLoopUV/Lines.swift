import CLibUV
import ReactiveLoopCore

#if canImport(Glibc)
    import Glibc
#endif

extension SignalProducer where Value == ReceivedBytes, Error == UVError {
    /// Splits a byte stream into lines, without a copy for a line that arrived in one piece.
    ///
    /// A line ends at `\n`; a `\r` before it is dropped too, and the line is sent without its
    /// ending (empty lines included). A line is sent only once its `\n` arrives: an unterminated
    /// tail when the stream completes or fails is not a line, as a record cut short by a
    /// disconnect; it is handed to `unterminatedTail` (if given) just before the stream ends, so
    /// that the caller can count or log what it lost. A line longer than `maxLength` bytes (its
    /// ending not counted) fails the stream with `EMSGSIZE` as soon as it is known to be too
    /// long, so memory stays bounded by `maxLength`; the input run is then disposed (for a
    /// `TCPConnection`, reading stops; closing is the caller's call).
    ///
    /// - Parameter unterminatedTail: Called, on the thread of the stream's events, with the
    ///   bytes after the last `\n` when the stream completes or fails with some (never when the
    ///   run is interrupted or disposed, nor after a line too long).
    /// - Precondition: `maxLength` is positive.
    public func lineBytes(maxLength: Int, unterminatedTail: ((ReceivedBytes) -> Void)? = nil) -> SignalProducer<
        ReceivedBytes, UVError
    > {
        _require(maxLength > 0, "lineBytes(maxLength:): maxLength must be > 0, got \(maxLength)")
        return SignalProducer { observer, lifetime in
            var framer = _LineFramer(maxLength: maxLength)
            lifetime += start { event in
                switch event {
                case let .value(chunk):
                    if !framer.feed(chunk, observer.send(value:)) {
                        let code = Int32(UV_EMSGSIZE.rawValue)
                        let what = "lines(maxLength: \(maxLength)): a line longer than \(maxLength) bytes"
                        observer.send(error: UVError(code: code, operation: what))
                    }
                case let .failed(error):
                    if let tail = framer.tail { unterminatedTail?(tail) }
                    observer.send(error: error)
                case .completed:
                    if let tail = framer.tail { unterminatedTail?(tail) }
                    observer.sendCompleted()
                case .interrupted: observer.sendInterrupted()
                }
            }
        }
    }

    /// Splits a byte stream into lines decoded as UTF-8 (invalid bytes replaced by U+FFFD); see
    /// `lineBytes(maxLength:)` for the framing.
    ///
    /// - Precondition: `maxLength` is positive.
    public func lines(maxLength: Int) -> SignalProducer<String, UVError> {
        _require(maxLength > 0, "lines(maxLength:): maxLength must be > 0, got \(maxLength)")
        return lineBytes(maxLength: maxLength).map { String(decoding: $0, as: UTF8.self) }
    }
}

/// The state of `lineBytes(maxLength:)`: the start of a line that spans chunks.
struct _LineFramer {
    let maxLength: Int
    private var partial: [UInt8] = []

    init(maxLength: Int) { self.maxLength = maxLength }

    /// The bytes received after the last line's `\n`, if any.
    var tail: ReceivedBytes? { partial.isEmpty ? nil : ReceivedBytes(partial) }

    /// Sends every line `chunk` completes to `emit`; returns `false` once a line is too long.
    mutating func feed(_ chunk: ReceivedBytes, _ emit: (ReceivedBytes) -> Void) -> Bool {
        var start = chunk.startIndex
        while start < chunk.endIndex {
            let newline = chunk.withUnsafeBytes { bytes -> Int? in
                let from = start - chunk.startIndex
                guard let found = memchr(bytes.baseAddress! + from, 0x0A, bytes.count - from) else { return nil }
                return chunk.startIndex + (UnsafeRawPointer(found) - bytes.baseAddress!)
            }
            guard let newline else {
                // Room for one more byte: a `\r` that the next chunk's `\n` ends.
                guard partial.count + (chunk.endIndex - start) <= maxLength + 1 else { return false }
                partial.append(contentsOf: chunk[start...])
                return true
            }
            var line: ReceivedBytes
            if partial.isEmpty {
                line = chunk[start..<newline]
            } else {
                partial.append(contentsOf: chunk[start..<newline])
                line = ReceivedBytes(partial)
                partial.removeAll(keepingCapacity: true)
            }
            if line.last == 0x0D { line = line[line.startIndex..<(line.endIndex - 1)] }
            guard line.count <= maxLength else { return false }
            emit(line)
            start = newline + 1
        }
        return true
    }
}
