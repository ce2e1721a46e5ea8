import LoopdCore
import Testing

@Suite("DogStatsD frames on a Unix stream")
struct DogStatsDFramesTests {
    /// `payload` framed as DogStatsD's clients frame it.
    func frame(_ payload: [UInt8]) -> [UInt8] {
        let count = UInt32(payload.count)
        return [UInt8(count & 0xff), UInt8(count >> 8 & 0xff), UInt8(count >> 16 & 0xff), UInt8(count >> 24)] + payload
    }

    /// The payloads `decoder` hands out for `stream` cut at `cuts`, and the refused length.
    func decode(_ stream: [UInt8], cuts: [Int], maxFrame: Int = 1000) -> ([[UInt8]], Int?, pending: Int) {
        var decoder = DogStatsDFrameDecoder(maxFrame: maxFrame)
        var payloads: [[UInt8]] = []
        var refused: Int?
        var start = 0
        for end in cuts.sorted() + [stream.count] where end >= start {
            let result = stream[start..<end].withUnsafeBytes { decoder.feed($0) { payloads.append(Array($0)) } }
            refused = refused ?? result
            start = end
        }
        return (payloads, refused, decoder.pendingBytes)
    }

    @Test func payloadsComeOutWholeWhereverTheReadsAreCut() {
        var generator = SystemRandomNumberGenerator()
        for round in 0..<200 {
            let payloads = (0..<Int.random(in: 1...12, using: &generator)).map { index in
                // Empty payloads (skipped), short ones, and ones longer than 255 bytes.
                [UInt8]("m\(round).\(index):1|c\n".utf8)
                    + [UInt8](repeating: 120, count: [0, 3, 300][index % 3])
            }
            let stream = payloads.flatMap(frame) + frame([])
            let cuts = (0..<Int.random(in: 0...20, using: &generator)).map { _ in
                Int.random(in: 0...stream.count, using: &generator)
            }
            let (decoded, refused, pending) = decode(stream, cuts: cuts)
            #expect(decoded == payloads, "cuts \(cuts.sorted())")
            #expect(refused == nil && pending == 0)
        }
        // Every single cut, one byte at a time.
        let stream = frame(Array("a:1|c".utf8)) + frame(Array("b:2|c\nc:3|c".utf8))
        #expect(decode(stream, cuts: Array(0...stream.count)).0 == [Array("a:1|c".utf8), Array("b:2|c\nc:3|c".utf8)])
    }

    @Test func aFrameLongerThanTheBoundStopsTheDecoderAndAnUnfinishedOneIsPending() {
        let stream =
            frame(Array("ok:1|c".utf8)) + frame([UInt8](repeating: 1, count: 1001)) + frame(Array("x:1|c".utf8))
        let (decoded, refused, _) = decode(stream, cuts: [7, 12])
        #expect(decoded == [Array("ok:1|c".utf8)])
        #expect(refused == 1001, "the length that could not be taken")
        // A length of 0xFFFFFFFF: refused, not read as a negative or huge count.
        #expect(decode([255, 255, 255, 255, 1, 2], cuts: []).1 == 4_294_967_295)
        let cut = frame(Array("partial:1|c".utf8)).dropLast(3)
        let (none, noRefusal, pending) = decode(Array(cut), cuts: [2])
        #expect(none.isEmpty && noRefusal == nil && pending == cut.count - 4)
        #expect(decode([5, 0], cuts: []).pending == 2, "half a length is pending too")
        #expect(
            decode(frame(Array(repeating: 65, count: 1000)), cuts: [500]).0.first?.count == 1000,
            "the bound is inclusive")
    }
}
