import CGlibcMalloc

#if canImport(Glibc)
    import Glibc
#endif

/// How loopd asks glibc's allocator to place large blocks, set once when the process starts.
///
/// With many series, a flush makes and frees blocks of megabytes: the copies of each reader's
/// per-interval columns, the merge's scratch, the summaries of the series and the formatted
/// output; the tables' columns, which grow by doubling, are as large. glibc maps a block for
/// itself (`mmap`) only while it is above its mapping threshold, which starts at 128 KiB and
/// rises to the size of each mapped block freed, up to 32 MiB. After the first flush every
/// such block came from the heap, where freed blocks between live ones stay resident: 100,000
/// counter series over two readers peaked at 121 to 139 MiB, where they now peak at 89 to 94.
///
/// loopd fixes the threshold at `mappingThreshold`, so that a large block is always mapped and
/// goes back to the system when it is freed. The price is fresh pages: a flush's large blocks
/// are mapped and their pages zeroed anew, 13 to 28 ms of CPU per flush of 100,000 series.
/// No block on the path of a line is that large.
///
/// An operator who sets the threshold through glibc's environment (`GLIBC_TUNABLES` with
/// `glibc.malloc.mmap_threshold`, or `MALLOC_MMAP_THRESHOLD_`) keeps that setting.
enum AllocatorPolicy {
    /// The size from which a block is mapped for itself: glibc's initial threshold, kept fixed.
    static let mappingThreshold: Int32 = 128 << 10

    /// Whether the environment already sets glibc's mapping threshold, in which case loopd
    /// leaves it as set.
    ///
    /// - Parameter environment: the variable's values, by name (only `GLIBC_TUNABLES` and
    ///   `MALLOC_MMAP_THRESHOLD_` are read).
    static func environmentSetsThreshold(_ environment: (String) -> String?) -> Bool {
        if environment("MALLOC_MMAP_THRESHOLD_") != nil { return true }
        guard let tunables = environment("GLIBC_TUNABLES") else { return false }
        // A colon-separated list of name=value; glibc takes the last of a name.
        return tunables.split(separator: ":").contains { entry in
            entry.split(separator: "=", maxSplits: 1).first == "glibc.malloc.mmap_threshold"
        }
    }

    /// Fixes glibc's mapping threshold at `mappingThreshold` unless the environment sets it.
    ///
    /// - Returns: whether it did (false also where the allocator refused the setting).
    @discardableResult
    static func apply(environment: (String) -> String? = { getenv($0).map { String(cString: $0) } }) -> Bool {
        guard !environmentSetsThreshold(environment) else { return false }
        return mallopt(M_MMAP_THRESHOLD, mappingThreshold) == 1
    }
}
