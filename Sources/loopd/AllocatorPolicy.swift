import CGlibcMalloc

#if canImport(Glibc)
    import Glibc
#endif

/// How loopd asks glibc's allocator to place large blocks, set once when the process starts.
///
/// With many series, a flush makes and frees blocks of megabytes: the copies of each reader's
/// per-interval columns, the merge's scratch and the formatted output (the summaries of the
/// series are kept from one flush to the next); a table's columns, which grow by doubling,
/// are as large. glibc maps a block for itself (`mmap`) only when the heap has no free room
/// for it and it is at least the mapping threshold. That threshold starts at 128 KiB, and
/// whenever a mapped block larger than it is freed (up to 32 MiB), it rises to that block's
/// size and the heap's trim threshold to twice that: from then on such blocks come from the
/// heap, and the heap keeps its freed room instead of giving it back. With 100,000 counter
/// series over two readers, that room made the process' peak 1.2 to 1.6 times what it is with
/// the threshold fixed (see docs/performance.md, "Large blocks, mapped").
///
/// loopd fixes the threshold at `mappingThreshold`, which also stops glibc from raising either
/// threshold: a large block that finds no free room in the heap is mapped for itself and goes
/// back to the system when it is freed. The price is fresh pages: a flush's large blocks are
/// mapped and their pages zeroed anew at each flush.
///
/// An operator who sets the threshold through glibc's environment (`GLIBC_TUNABLES` with a
/// `glibc.malloc.mmap_threshold=` entry, or `MALLOC_MMAP_THRESHOLD_`, even empty: glibc reads
/// that as 0) keeps that setting, except in secure mode (a set-user-ID or set-group-ID binary,
/// one with file capabilities, or one a security module marks so), where glibc ignores those
/// variables and loopd fixes the threshold as usual.
enum AllocatorPolicy {
    /// The size from which a block is mapped for itself: glibc's initial threshold, kept fixed.
    static let mappingThreshold: Int32 = 128 << 10

    /// What `apply` did.
    enum Outcome: Equatable {
        /// The threshold is fixed at `mappingThreshold`.
        case fixed
        /// The environment sets the threshold; loopd left it as set.
        case leftToEnvironment
        /// The allocator refused the setting (one that is not glibc's, as AddressSanitizer's).
        case refused
    }

    /// Whether the environment sets glibc's mapping threshold: an entry
    /// `glibc.malloc.mmap_threshold=` in `GLIBC_TUNABLES` (a colon-separated list of name=value),
    /// or `MALLOC_MMAP_THRESHOLD_` at all. Whether glibc accepts the value is glibc's to decide;
    /// loopd leaves the threshold to it either way.
    ///
    /// - Parameter environment: the variables' values, by name.
    static func environmentSetsThreshold(_ environment: (String) -> String?) -> Bool {
        if environment("MALLOC_MMAP_THRESHOLD_") != nil { return true }
        guard let tunables = environment("GLIBC_TUNABLES") else { return false }
        return tunables.split(separator: ":").contains { $0.hasPrefix("glibc.malloc.mmap_threshold=") }
    }

    /// Fixes glibc's mapping threshold at `mappingThreshold` unless the environment sets it (and
    /// the process is not in secure mode, where glibc ignores the environment's setting).
    ///
    /// - Parameters:
    ///   - environment: the variables' values, by name.
    ///   - secure: whether the process runs in secure mode (`AT_SECURE`).
    ///   - set: sets an allocator parameter, as `mallopt` does: 1 on success.
    @discardableResult
    static func apply(
        environment: (String) -> String? = { getenv($0).map { String(cString: $0) } },
        secure: Bool = getauxval(UInt(AT_SECURE)) != 0,
        set: (Int32, Int32) -> Int32 = { mallopt($0, $1) }
    ) -> Outcome {
        if !secure && environmentSetsThreshold(environment) { return .leftToEnvironment }
        return set(M_MMAP_THRESHOLD, mappingThreshold) == 1 ? .fixed : .refused
    }

    /// A log line for `outcome`.
    static func description(of outcome: Outcome) -> String {
        switch outcome {
        case .fixed: "glibc's mapping threshold fixed at \(mappingThreshold >> 10) KiB"
        case .leftToEnvironment: "glibc's mapping threshold left as the environment sets it"
        case .refused: "the allocator refused a fixed mapping threshold (it is not glibc's): left as it is"
        }
    }
}
