// A quantile sketch with a relative-error bound, for timers whose samples outgrow the exact store.
// Standard library only (the fuzz target compiles it with the parser).

/// A mergeable quantile sketch with a relative-error guarantee, in the style of DDSketch
/// (Masson, Rim and Lee, "DDSketch: A Fast and Fully-Mergeable Quantile Sketch with Relative-Error Guarantees",
/// VLDB 2019).
///
/// Every finite value is mapped to a bin whose bounds `[lo, hi)` satisfy `hi / lo <= e^0.02`; the sketch keeps one
/// counter per non-empty bin (a dense array per sign), a counter for zeros, and the exact count, minimum and maximum.
/// A quantile query returns the representative value of the bin that holds the requested rank, which is within
/// ``relativeAccuracy`` (1 %) of the true value of that rank.
///
/// ## Mapping: cubically interpolated logarithm (DDSketch's `CubicallyInterpolatedMapping`)
///
/// No `log` or `exp` from libm is used. For `|x| = 2^e * (1 + s)` with `s` in `[0, 1)` (read directly from the
/// exponent and mantissa bits), the sketch uses `f(x) = e + P(s)` as an approximation of `log2 |x|`, where
/// `P(s) = A*s^3 + B*s^2 + C*s` with `A = 6/35`, `B = -3/5`, `C = 10/7`, and the bin index is `floor(35 * f(x))`.
///
/// Proof of the bound (alpha = 0.01):
/// - `P(0) = 0` and `P(1) = A + B + C = 1`, so `f` is continuous across powers of two, and `P' > 0` on `[0, 1]`,
///   so `f` is strictly increasing: bins are contiguous intervals ordered like the values they hold.
/// - Within an octave, `d(ln x) / df = 1 / ((1 + s) * P'(s))`. Let `g(s) = 35 * (1 + s) * P'(s)
///   = 18s^3 - 24s^2 + 8s + 50`; `g'(s) = 54s^2 - 48s + 8` vanishes at `s = 2/9` and `s = 2/3`, and
///   `g(0) = g(2/3) = 50`, `g(2/9) ~ 50.8`, `g(1) = 52`, so `g >= 50` on `[0, 1]` and `d(ln x) / df <= 7/10`.
/// - A bin spans `1/35` in `f`, hence `ln(hi / lo) <= (7/10) / 35 = 0.02`.
/// - The representative of a bin is the harmonic midpoint `v = 2 * lo * hi / (lo + hi)`. For any `x` in
///   `[lo, hi]`, `|v - x| / x <= (hi - lo) / (hi + lo) = tanh(ln(hi / lo) / 2) <= tanh(0.01) ~ 0.0099997 < 0.01`.
///   The margin (about 3.3e-7, relative) absorbs floating-point rounding in the index computation, where a value
///   within a few ulps of a bin bound may land in the neighbouring bin.
///
/// This costs 35 bins per octave, about 1 % more than the exact logarithmic mapping (`ln 2 / 0.02 ~ 34.66`).
///
/// ## Bounded memory and collapsing
///
/// Each sign keeps at most ``maxBins`` contiguous bins, which covers `2048 / 35 ~ 58.5` octaves (a ratio of about
/// `4e17`, i.e. 17.6 decades) between the smallest and largest magnitude of that sign. When a value would extend
/// the range beyond that, the window of bins stays where the mass is: values beyond it are folded into its edge
/// bin, and it moves only when the bins it would fold at its other end hold no more than what has gathered at
/// the edge. One outlier, however far (a client's `1e25` among latencies of 1 to 1,000), is folded itself and
/// keeps the bulk's quantiles within the bound; its exact value is still the sketch's ``min`` or ``max``.
/// Only quantiles whose rank falls among folded values lose the guarantee. The result depends on the order of
/// additions and merges only when values were folded.
///
/// Values with `|x|` below `Double.leastNormalMagnitude` (about `2.2e-308`, i.e. zero and subnormals) are counted
/// as zero. Non-finite values (infinities, NaN) are ignored.
public struct QuantileSketch: Sendable, Equatable {
    /// The relative accuracy `alpha`: every quantile returned is within `alpha * |x|` of the true sample value `x`
    /// of that rank (unless that rank falls among values folded by the ``maxBins`` limit).
    public static let relativeAccuracy: Double = 0.01

    /// The maximum number of bins kept per sign. Beyond it, values outside the window are folded into its
    /// nearest bin (see the type's documentation), and only quantiles whose rank falls among them lose the
    /// accuracy guarantee.
    public static let maxBins: Int = 2048

    /// Bins per unit of `f(x) ~ log2 |x|` (see the type documentation).
    private static let binsPerOctave: Int = 35

    @usableFromInline var positive = BinStore()
    @usableFromInline var negative = BinStore()
    @usableFromInline var zeroCount: UInt64 = 0
    @usableFromInline var total: UInt64 = 0
    @usableFromInline var minValue: Double = .infinity
    @usableFromInline var maxValue: Double = -.infinity

    /// Creates an empty sketch. No memory is allocated until the first non-zero value is added.
    public init() {}

    /// Adds one value. Values with magnitude below `Double.leastNormalMagnitude` count as zero; non-finite values
    /// are ignored. Does not allocate unless the value extends the range of bins already covered.
    @inlinable
    public mutating func add(_ value: Double) {
        guard value.isFinite else { return }
        total &+= 1
        if value < minValue { minValue = value }
        if value > maxValue { maxValue = value }
        let bits = value.bitPattern
        if bits & 0x7FF0_0000_0000_0000 == 0 {
            zeroCount &+= 1
            return
        }
        let index = Self.binIndex(magnitudeBits: bits)
        if bits >> 63 == 0 {
            positive.add(index, 1)
        } else {
            negative.add(index, 1)
        }
    }

    /// Adds all values of `other` to this sketch. The result is the same as adding every value of both sketches
    /// to one sketch (in any order).
    public mutating func merge(_ other: QuantileSketch) {
        guard other.total > 0 else { return }
        total &+= other.total
        zeroCount &+= other.zeroCount
        if other.minValue < minValue { minValue = other.minValue }
        if other.maxValue > maxValue { maxValue = other.maxValue }
        positive.merge(other.positive)
        negative.merge(other.negative)
    }

    /// The number of (finite) values added.
    public var count: UInt64 { total }

    /// The exact smallest value added, or 0 if the sketch is empty.
    public var min: Double { total == 0 ? 0 : minValue }

    /// The exact largest value added, or 0 if the sketch is empty.
    public var max: Double { total == 0 ? 0 : maxValue }

    /// The nearest-rank quantile: for rank `r = max(1, ceil(count * p))`, the value `v` returned satisfies
    /// `|v - x_r| <= relativeAccuracy * |x_r|`, where `x_r` is the `r`-th smallest value added, and `v` is clamped
    /// to `[min, max]` (which can only reduce the error). A rank of 1 returns ``min`` and a rank of ``count``
    /// returns ``max`` exactly. The guarantee does not hold if `x_r` was collapsed (see ``maxBins``), nor for values
    /// treated as zero. `rank` is clamped to `1...count`; an empty sketch returns 0.
    public func quantile(rank: UInt64) -> Double {
        guard total > 0 else { return 0 }
        let r = Swift.min(Swift.max(rank, 1), total)
        if r == 1 { return minValue }
        if r == total { return maxValue }
        var remaining = r
        var result = 0.0
        if let index = negative.findDescending(&remaining) {
            result = -Self.representative(index)
        } else if remaining <= zeroCount {
            result = 0
        } else {
            remaining -= zeroCount
            if let index = positive.findAscending(&remaining) {
                result = Self.representative(index)
            } else {
                result = maxValue
            }
        }
        return Swift.min(Swift.max(result, minValue), maxValue)
    }

    /// How many added values are `<= bound`, approximately: every value `<= bound` is counted (unless
    /// it was collapsed, see ``maxBins``), and so is every value of `bound`'s own bin, so a value
    /// `x > bound` is counted only if it shares that bin, which implies
    /// `x - bound <= 2 * relativeAccuracy / (1 - relativeAccuracy) * |x|`. The result is exact for a
    /// `bound` outside `(min, max)`. A value exactly on a bound (integer data on round bounds) is
    /// thus always counted, as Prometheus' `le` asks. NaN counts nothing.
    public func count(atOrBelow bound: Double) -> UInt64 {
        guard total > 0, !bound.isNaN else { return 0 }
        if bound < minValue { return 0 }
        if bound >= maxValue { return total }
        let bits = bound.bitPattern
        let isTiny = bits & 0x7FF0_0000_0000_0000 == 0
        if bound < 0 {
            // Negative values with |v| >= |bound|: higher-index negative bins, plus the bound's own bin.
            if isTiny { return negative.totalCount }
            let index = Self.binIndex(magnitudeBits: bits)
            return negative.count(aboveIndex: index, includingIndex: true)
        }
        var result = negative.totalCount + zeroCount
        if isTiny { return result }
        let index = Self.binIndex(magnitudeBits: bits)
        result += positive.count(belowIndex: index, includingIndex: true)
        return result
    }

    /// The sum and the sum of squares of the `n` smallest values added, each value taken as its
    /// bin's representative (within ``relativeAccuracy`` of it, so each term is within that
    /// relative error too, and so is the sum of values of one sign); etsy StatsD's `sum_90` of a
    /// series past its exact samples. `n` is clamped to `count`.
    public func lowest(_ n: UInt64) -> (sum: Double, sumSquares: Double) {
        var remaining = Swift.min(n, total)
        var sum = 0.0
        var squares = 0.0
        func take(_ count: UInt64, _ value: Double) {
            let taken = Swift.min(count, remaining)
            sum += Double(taken) * value
            squares += Double(taken) * value * value
            remaining -= taken
        }
        if negative.maxIndex >= negative.minIndex {
            for index in stride(from: negative.maxIndex, through: negative.minIndex, by: -1) where remaining > 0 {
                take(negative.counts[index - negative.offset], -Self.representative(index))
            }
        }
        take(zeroCount, 0)
        if positive.maxIndex >= positive.minIndex {
            for index in positive.minIndex...positive.maxIndex where remaining > 0 {
                take(positive.counts[index - positive.offset], Self.representative(index))
            }
        }
        return (sum, squares)
    }

    /// Bytes of memory used by this sketch: the inline size (112 bytes on 64-bit) plus the heap capacity of the two
    /// bin arrays (8 bytes per bin plus an estimated 32-byte header each). At most about 33 KB (two full arrays of
    /// ``maxBins`` bins, whose capacity malloc may round up by an element or two).
    public var storageBytes: Int {
        MemoryLayout<QuantileSketch>.size + positive.heapBytes + negative.heapBytes
    }

    /// Two sketches are equal when they hold the same counts in the same bins, with the same exact minimum,
    /// maximum and count (independently of how their storage was laid out).
    public static func == (lhs: QuantileSketch, rhs: QuantileSketch) -> Bool {
        lhs.total == rhs.total && lhs.zeroCount == rhs.zeroCount
            && (lhs.total == 0 || (lhs.minValue == rhs.minValue && lhs.maxValue == rhs.maxValue))
            && lhs.positive.sameBins(as: rhs.positive) && lhs.negative.sameBins(as: rhs.negative)
    }

    // MARK: - Mapping

    /// `floor(35 * (e + P(s))) = 35 * e + floor(35 * P(s))` for `|x| = 2^e * (1 + s)`, with
    /// `35 * P(s) = ((6s - 21)s + 50)s` in `[0, 35]`; truncation is the floor there, so no libm `floor` call is
    /// needed. `bits` must be the bit pattern of a normal Double (sign bit ignored).
    @inlinable @inline(__always)
    static func binIndex(magnitudeBits bits: UInt64) -> Int {
        let exponent = Int(truncatingIfNeeded: (bits >> 52) & 0x7FF) &- 1023
        let s = Double(bitPattern: (bits & 0x000F_FFFF_FFFF_FFFF) | 0x3FF0_0000_0000_0000) - 1.0
        let scaled = ((6.0 * s - 21.0) * s + 50.0) * s
        return exponent &* 35 &+ Int(scaled)
    }

    /// For `r` in `0...35`: `1 + P^-1(r / 35)`, i.e. the lower bound of bin `r` within the octave `[1, 2)`.
    private static let octaveBounds: [Double] = (0...35).map { r -> Double in
        if r == 35 { return 2 }
        var s = Double(r) / 35  // Solve 35 * P(s) = r. P(s) >= s on [0, 1], so the root is <= r / 35; P is
        // increasing and concave there, so Newton's method converges (monotonically after the first step).
        for _ in 0..<8 {
            let p = ((6.0 * s - 21.0) * s + 50.0) * s - Double(r)
            let dp = (18.0 * s - 42.0) * s + 50.0
            s -= p / dp
        }
        return 1 + s
    }

    /// For `r` in `0..<35`: the harmonic midpoint of bin `r` within the octave `[1, 2)`.
    private static let octaveRepresentatives: [Double] = (0..<35).map { r -> Double in
        let lo = octaveBounds[r], hi = octaveBounds[r + 1]
        return 2 * lo * hi / (lo + hi)
    }

    /// Splits a bin index into its octave (binary exponent) and its position within the octave.
    @inline(__always)
    private static func split(_ index: Int) -> (exponent: Int, offset: Int) {
        let exponent = index >= 0 ? index / binsPerOctave : -((-index + binsPerOctave - 1) / binsPerOctave)
        return (exponent, index - exponent * binsPerOctave)
    }

    /// The representative (harmonic midpoint) magnitude of bin `index`.
    static func representative(_ index: Int) -> Double {
        let (exponent, offset) = split(index)
        return Double(sign: .plus, exponent: exponent, significand: octaveRepresentatives[offset])
    }

}

/// Counts per bin index for one sign: a dense array covering bin indices `offset ..< offset + counts.count`.
@usableFromInline
struct BinStore: Sendable {
    @usableFromInline var counts: [UInt64] = []
    /// Bin index of `counts[0]`.
    @usableFromInline var offset: Int = 0
    /// Lowest and highest non-empty bin indices (`Int.max` / `Int.min` when empty).
    @usableFromInline var minIndex: Int = .max
    @usableFromInline var maxIndex: Int = .min
    /// Whether lower bins were folded into `minIndex`. Invariant when set: `offset == minIndex`,
    /// `counts.count == maxBins` and `maxIndex - minIndex + 1 == maxBins`.
    @usableFromInline var isCollapsed = false

    @usableFromInline init() {}

    @inlinable @inline(__always)
    mutating func add(_ index: Int, _ n: UInt64) {
        let position = index &- offset
        if position >= 0 && position < counts.count {
            counts[position] &+= n
            if index < minIndex { minIndex = index }
            if index > maxIndex { maxIndex = index }
        } else {
            addOutOfRange(index, n)
        }
    }

    /// Grows, shifts or collapses the array so that `index` is covered, or folds it into the
    /// nearest bin of a window already `maxBins` wide.
    ///
    /// When the range would pass `maxBins`, the window is placed where the mass is: it moves to
    /// take a value beyond one end only if the bins it would fold at the other end hold no more
    /// than what has gathered at that end (so one outlier, at either end, never folds the
    /// bulk of the values into one bin: it is folded itself, into the edge bin, its exact
    /// value kept as the sketch's min or max); a distribution that moves moves the window once
    /// enough of it has gathered at the edge.
    @usableFromInline
    mutating func addOutOfRange(_ index: Int, _ n: UInt64) {
        let maxBins = QuantileSketch.maxBins
        let isEmpty = maxIndex < minIndex
        let lo = isEmpty ? index : Swift.min(index, minIndex)
        let hi = isEmpty ? index : Swift.max(index, maxIndex)
        let newOffset: Int
        let newLength: Int
        // When the window moves, the values gathered at the edge it leaves were beyond it, where
        // the window goes: they go with the new value rather than to the far end.
        var carried: UInt64 = 0
        if hi - lo + 1 > maxBins {
            newLength = maxBins
            isCollapsed = true
            // Where the window may go: with the new value in its middle (room for the values
            // around it), or at its edge (the least move); it goes to the first whose folded
            // bins hold no more than what has gathered at the edge.
            // (The edge's own count is what gathered beyond it: it is not counted as folded.)
            if index > maxIndex {
                let edgeIndex = minIndex + maxBins - 1
                let edge = count(at: edgeIndex)
                newOffset =
                    [index - maxBins / 2, index - maxBins + 1].first { offset in
                        let folded = count(belowIndex: offset, includingIndex: false)
                        return (edgeIndex < offset ? folded - edge : folded) <= edge + n
                    } ?? minIndex
                if newOffset != minIndex && edgeIndex < newOffset { carried = takeCount(at: edgeIndex) }
            } else {
                let edgeIndex = maxIndex - maxBins + 1
                let edge = count(at: edgeIndex)
                newOffset =
                    [index - maxBins / 2, index].first { offset in
                        let folded = count(aboveIndex: offset + maxBins - 1, includingIndex: false)
                        return (edgeIndex > offset + maxBins - 1 ? folded - edge : folded) <= edge + n
                    } ?? maxIndex - maxBins + 1
                if newOffset != maxIndex - maxBins + 1 && edgeIndex > newOffset + maxBins - 1 {
                    carried = takeCount(at: edgeIndex)
                }
            }
        } else {
            let needed = hi - lo + 1
            newLength = Swift.min(maxBins, needed + Swift.max(isEmpty ? 32 : 16, needed / 4))
            if isEmpty {
                newOffset = index - newLength / 2
            } else if index > maxIndex {
                newOffset = lo
            } else {
                newOffset = hi - newLength + 1
            }
        }
        relayout(offset: newOffset, length: newLength)
        let target = Swift.min(Swift.max(index, newOffset), newOffset + newLength - 1)
        counts[target - newOffset] &+= n &+ carried
        if target < minIndex { minIndex = target }
        if target > maxIndex { maxIndex = target }
    }

    /// Empties bin `index` and returns what it held.
    private mutating func takeCount(at index: Int) -> UInt64 {
        let position = index - offset
        guard position >= 0 && position < counts.count else { return 0 }
        defer { counts[position] = 0 }
        return counts[position]
    }

    /// The count of bin `index` (0 outside the array).
    private func count(at index: Int) -> UInt64 {
        let position = index - offset
        return position >= 0 && position < counts.count ? counts[position] : 0
    }

    /// Moves the non-empty bins into an array covering `offset ..< offset + length`, folding
    /// bins below it into its first bin and bins above it into its last. Reuses the buffer when
    /// nothing moves.
    private mutating func relayout(offset newOffset: Int, length: Int) {
        if newOffset == offset && length == counts.count { return }
        guard maxIndex >= minIndex else {
            counts = [UInt64](repeating: 0, count: length)
            offset = newOffset
            return
        }
        let top = newOffset + length - 1
        var fresh = [UInt64](repeating: 0, count: length)
        var (low, high) = (Int.max, Int.min)
        for index in minIndex...maxIndex {
            let count = counts[index - offset]
            guard count != 0 else { continue }
            let target = Swift.min(Swift.max(index, newOffset), top)
            fresh[target - newOffset] &+= count
            (low, high) = (Swift.min(low, target), Swift.max(high, target))
        }
        counts = fresh
        offset = newOffset
        (minIndex, maxIndex) = (low, high)
    }

    /// Adds every bin of `other`. The extreme bins go first so that the array is resized at most twice.
    mutating func merge(_ other: BinStore) {
        guard other.maxIndex >= other.minIndex else { return }
        // If `other` is collapsed its range is exactly `maxBins` wide, so adding its extreme bins either collapses
        // this store to the same floor (or a higher one) or leaves it spanning exactly `other`'s range.
        add(other.maxIndex, other.counts[other.maxIndex - other.offset])
        if other.minIndex == other.maxIndex { return }
        add(other.minIndex, other.counts[other.minIndex - other.offset])
        if other.maxIndex - other.minIndex >= 2 {
            for j in (other.minIndex + 1)..<other.maxIndex {
                let c = other.counts[j - other.offset]
                if c != 0 { add(j, c) }
            }
        }
        if other.isCollapsed { isCollapsed = true }
    }

    /// Sum of all bins.
    var totalCount: UInt64 {
        guard maxIndex >= minIndex else { return 0 }
        var sum: UInt64 = 0
        for j in minIndex...maxIndex { sum &+= counts[j - offset] }
        return sum
    }

    /// Walks bins from the lowest index up; returns the bin holding the `remaining`-th value, or subtracts this
    /// store's total from `remaining` and returns `nil`.
    func findAscending(_ remaining: inout UInt64) -> Int? {
        guard maxIndex >= minIndex else { return nil }
        for j in minIndex...maxIndex {
            let c = counts[j - offset]
            if remaining <= c { return j }
            remaining -= c
        }
        return nil
    }

    /// Like ``findAscending(_:)`` but from the highest index down (for negative values, most negative first).
    func findDescending(_ remaining: inout UInt64) -> Int? {
        guard maxIndex >= minIndex else { return nil }
        for j in stride(from: maxIndex, through: minIndex, by: -1) {
            let c = counts[j - offset]
            if remaining <= c { return j }
            remaining -= c
        }
        return nil
    }

    /// Sum of bins with index `< index`, plus bin `index` if `includingIndex`.
    func count(belowIndex index: Int, includingIndex: Bool) -> UInt64 {
        guard maxIndex >= minIndex else { return 0 }
        let last = Swift.min(includingIndex ? index : index - 1, maxIndex)
        guard last >= minIndex else { return 0 }
        var sum: UInt64 = 0
        for j in minIndex...last { sum &+= counts[j - offset] }
        return sum
    }

    /// Sum of bins with index `> index`, plus bin `index` if `includingIndex`.
    func count(aboveIndex index: Int, includingIndex: Bool) -> UInt64 {
        guard maxIndex >= minIndex else { return 0 }
        let first = Swift.max(includingIndex ? index : index + 1, minIndex)
        guard first <= maxIndex else { return 0 }
        var sum: UInt64 = 0
        for j in first...maxIndex { sum &+= counts[j - offset] }
        return sum
    }

    /// Heap bytes held by the bin array (capacity plus an estimated 32-byte header), 0 if unallocated.
    var heapBytes: Int { counts.capacity == 0 ? 0 : 32 + counts.capacity * MemoryLayout<UInt64>.stride }

    /// Same non-empty bins and counts, regardless of layout.
    func sameBins(as other: BinStore) -> Bool {
        let emptySelf = maxIndex < minIndex, emptyOther = other.maxIndex < other.minIndex
        if emptySelf || emptyOther { return emptySelf == emptyOther }
        guard minIndex == other.minIndex, maxIndex == other.maxIndex, isCollapsed == other.isCollapsed else {
            return false
        }
        for j in minIndex...maxIndex where counts[j - offset] != other.counts[j - other.offset] { return false }
        return true
    }
}
