import LoopdCore
import ReactiveLoopCore
import ReactiveLoopUV

#if canImport(Glibc)
    import Glibc
#endif

/// What a stream client sent: a line (TCP, or a Unix stream client that sends lines), or a
/// DogStatsD frame's payload, which holds lines as a datagram does.
enum StreamRecord {
    case line(ReceivedBytes)
    case frame(UnsafeRawBufferPointer)
}

extension SignalProducer where Value == ReceivedBytes, Error == UVError {
    /// The records of a Unix stream client, which may send lines (as over TCP) or DogStatsD's
    /// frames (`DogStatsDFrameDecoder`): the first 4 bytes tell which. A frame's length below
    /// 16 MiB has a NUL as its 4th byte, where a StatsD line has a name's character (a client
    /// whose first line has a NUL there is read as sending frames).
    ///
    /// - Parameters:
    ///   - maxLine: The longest line; a longer one fails the run with `EMSGSIZE`.
    ///   - maxFrame: The longest frame; a longer one fails the run with `EMSGSIZE`.
    ///   - unterminatedTail: Gets what a client sent of its last line or frame, unfinished when
    ///     the stream ended.
    func statsDRecords(maxLine: Int, maxFrame: Int, unterminatedTail: @escaping (ReceivedBytes) -> Void)
        -> SignalProducer<StreamRecord, UVError>
    {
        SignalProducer<StreamRecord, UVError> { observer, lifetime in
            // Until the first 4 bytes are in: those bytes.
            var prefix: [UInt8]? = []
            var lines: Signal<ReceivedBytes, UVError>.Observer?
            var frames: DogStatsDFrameDecoder?

            func startLines(_ first: ReceivedBytes) {
                let (signal, input) = Signal<ReceivedBytes, UVError>.pipe()
                lines = input
                lifetime += SignalProducer(signal).lineBytes(maxLength: maxLine, unterminatedTail: unterminatedTail)
                    .start { event in
                        switch event {
                        case let .value(line): observer.send(value: .line(line))
                        case let .failed(error): observer.send(error: error)
                        case .completed: observer.sendCompleted()
                        case .interrupted: observer.sendInterrupted()
                        }
                    }
                input.send(value: first)
            }

            func decode(_ bytes: UnsafeRawBufferPointer) {
                guard let length = frames!.feed(bytes, { observer.send(value: .frame($0)) }) else { return }
                let code = -EMSGSIZE
                observer.send(
                    error: UVError(
                        code: code, operation: "a DogStatsD frame of \(length) bytes, longer than \(maxFrame)"))
            }

            lifetime += start { event in
                if case let .value(chunk) = event, var gathered = prefix {
                    let taken = min(4 - gathered.count, chunk.count)
                    gathered += chunk.prefix(taken)
                    guard gathered.count == 4 else { return prefix = gathered }
                    prefix = nil
                    if gathered[3] == 0 {
                        frames = DogStatsDFrameDecoder(maxFrame: maxFrame)
                        gathered.withUnsafeBytes { decode($0) }
                        chunk[(chunk.startIndex + taken)...].withUnsafeBytes { decode($0) }
                    } else {
                        // Lines: the bytes as they came, the first ones with the rest.
                        startLines(taken == 4 ? chunk : ReceivedBytes(gathered + chunk.dropFirst(taken)))
                    }
                    return
                }
                if let prefix, event.isTerminating, !prefix.isEmpty {
                    // Fewer than 4 bytes in all: a line not ended (or a frame's length cut).
                    startLines(ReceivedBytes(prefix))
                }
                switch event {
                case let .value(chunk):
                    if let lines {
                        lines.send(value: chunk)
                    } else {
                        chunk.withUnsafeBytes { decode($0) }
                    }
                case .failed, .completed:
                    if let lines { return lines.send(event) }
                    if let frames, frames.pendingBytes > 0 { unterminatedTail(ReceivedBytes(frames.partialPayload)) }
                    if case let .failed(error) = event { observer.send(error: error) } else { observer.sendCompleted() }
                case .interrupted:
                    if let lines { return lines.send(event) }
                    observer.sendInterrupted()
                }
            }
        }
    }
}
