import CGlibcMalloc
import Foundation
import Testing

@testable import loopd

#if canImport(Glibc)
    import Glibc
#endif

/// Whether this process (and so the loopd built with it) runs under a sanitizer, whose allocator
/// replaces glibc's: the allocator policy then has nothing to act on.
private let sanitizerAllocator =
    dlsym(UnsafeMutableRawPointer(bitPattern: 0), "__asan_init") != nil
    || dlsym(UnsafeMutableRawPointer(bitPattern: 0), "__tsan_init") != nil

@Suite("loopd's allocator policy", .serialized)
struct AllocatorPolicyTests {
    @Test func anOperatorsThresholdInTheEnvironmentIsLeftAsSet() {
        func sets(_ variables: [String: String]) -> Bool {
            AllocatorPolicy.environmentSetsThreshold { variables[$0] }
        }
        #expect(!sets([:]))
        #expect(!sets(["GLIBC_TUNABLES": ""]))
        #expect(!sets(["GLIBC_TUNABLES": "glibc.malloc.arena_max=2"]))
        #expect(!sets(["GLIBC_TUNABLES": "glibc.malloc.mmap_threshold_max=1:glibc.malloc.trim_threshold=1"]))
        #expect(sets(["GLIBC_TUNABLES": "glibc.malloc.mmap_threshold=65536"]))
        #expect(sets(["GLIBC_TUNABLES": "glibc.malloc.arena_max=2:glibc.malloc.mmap_threshold=1048576"]))
        #expect(sets(["MALLOC_MMAP_THRESHOLD_": "262144"]))
        #expect(!AllocatorPolicy.apply { $0 == "MALLOC_MMAP_THRESHOLD_" ? "262144" : nil }, "not applied")
    }

    @Test(.enabled(if: !sanitizerAllocator, "a sanitizer's allocator replaces glibc's"))
    func aLargeBlockIsMappedAfterALargerOneWasFreed() throws {
        #expect(AllocatorPolicy.apply { _ in nil })
        // glibc raises its threshold to the size of each mapped block freed: without the fixed
        // threshold, the 512 KiB block after the freed 8 MiB one would come from the heap.
        let large = try #require(malloc(8 << 20))
        memset(large, 1, 8 << 20)
        free(large)
        let before = mallinfo2().hblkhd
        let block = try #require(malloc(512 << 10))
        defer { free(block) }
        let mapped = mallinfo2().hblkhd - before
        #expect(mapped >= 512 << 10, "mapped \(mapped) bytes for a 512 KiB block")
    }

    /// 100,000 counter series in each of two readers, through flushes: each reader's table, the
    /// merged table, the flush's copies of the per-interval columns and the JSON lines. With
    /// glibc's rising threshold the freed copies stayed resident in the heap: loopd peaked 118
    /// to 144 MiB over its empty process in this load (debug and release builds); with the
    /// threshold fixed, 71 to 83.
    @Test(.enabled(if: !sanitizerAllocator, "a sanitizer's allocator replaces glibc's"))
    func aHundredThousandSeriesOverTwoReadersPeakUnderTheirBound() throws {
        let loopd = try LoopdProcess(["--readers", "2", "--max-series", "200000"], flushInterval: 0.2)
        usleep(200_000)
        let empty = loopd.residentBytes
        let senders = (0..<8).map { _ in UDPSender(port: loopd.port) }
        let datagrams = counterDatagrams("resident.series", series: 100_000)
        // Each round sends every series through another of the 8 sockets, so that each reader
        // comes to hold most of them; a few flushes run between rounds.
        for round in 0..<6 {
            for (index, datagram) in datagrams.enumerated() { senders[(index + round) % 8].send(datagram) }
            usleep(800_000)
        }
        let peak = try #require(loopd.peakResidentBytes)
        loopd.signal(SIGTERM)
        // The last flush holds every series that came in (each round's lines, less any the
        // kernel dropped): the load reached loopd.
        let last = try #require(try loopd.lastFlush())
        let counters = try #require(last["counters"] as? [[String: Any]])
        let series = counters.filter { ($0["name"] as? String)?.hasPrefix("resident.series.") == true }.count
        #expect(series > 90_000, "the last flush has \(series) series")
        let grown = (peak - empty) >> 20
        #expect(grown < 100, "loopd peaked \(grown) MiB over its empty process")
    }
}
