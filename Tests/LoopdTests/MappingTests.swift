import LoopdCore
import Testing

/// Mapping rules: what a line becomes (name, labels, dropped), in what order rules apply, what
/// a rule refuses to be, and how the ingest stage caches and reloads them.
@Suite("Mapping rules")
struct MappingTests {
    /// What `mapper` makes of `line`'s key, as "name|#tags", "drop", "unchanged" or the error.
    static func map(_ mapper: Mapper, _ line: String) -> String {
        var parser = StatsDParser(maxLineLength: 8192)
        precondition(parse(&parser, line) == nil, "\(line) does not parse")
        return parser.withKey { key in
            switch mapper.map(key: key) {
            case .unchanged: "unchanged"
            case .drop: "drop"
            case let .invalid(error, _): "invalid: \(error)"
            case let .mapped(mapped, _): String(decoding: mapped.dropFirst(), as: UTF8.self)
            }
        }
    }

    static func rule(
        _ match: String, _ type: MappingRule.MatchType = .glob, kinds: [MetricKind]? = nil,
        action: MappingRule.Action = .map, name: String? = nil, labels: [(key: String, value: String)] = [],
        percentiles: [Double]? = nil
    ) -> MappingRule {
        try! MappingRule(
            match: match, matchType: type, kinds: kinds, action: action, name: name, labels: labels,
            percentiles: percentiles)
    }

    @Test func aGlobStarMatchesWithinOneComponentAndCaptures() {
        let mapper = Mapper(rules: [
            Self.rule("api.*.requests", name: "api.requests", labels: [("endpoint", "$1"), ("whole", "$0")])
        ])
        #expect(Self.map(mapper, "api.users.requests:1|c") == "api.requests|#endpoint:users,whole:api.users.requests")
        #expect(Self.map(mapper, "api.a.b.requests:1|c") == "unchanged", "* does not cross a dot")
        #expect(Self.map(mapper, "api.requests:1|c") == "unchanged", "the component count must match")
        #expect(Self.map(mapper, "api.users.requests.x:1|c") == "unchanged")
        #expect(Self.map(mapper, "api..requests:1|c") == "api.requests|#endpoint:,whole:api..requests")
    }

    @Test func severalStarsInAComponentCaptureEach() {
        let mapper = Mapper(rules: [Self.rule("db_*_ms_*.q", name: "db.$1.${2}x")])
        #expect(Self.map(mapper, "db_users_ms_p99.q:1|ms") == "db.users.p99x")
        // The earlier star takes as little as it can, the last backtracks.
        #expect(Self.map(mapper, "db_a_ms_b_ms_c.q:1|ms") == "db.a.b_ms_cx")
        #expect(Self.map(mapper, "db__ms_.q:1|ms") == "db..x")
        #expect(Self.map(mapper, "dbx_a_ms_b.q:1|ms") == "unchanged")
    }

    @Test func aGlobIsLinearOnAHostileName() {
        // Backtracking to every star would be exponential here; the classic match backtracks to
        // the last star only.
        let mapper = Mapper(rules: [Self.rule("*a*a*a*a*a*a*a*a*a*b", name: "x")])
        let name = String(repeating: "a", count: 4000)
        let clock = ContinuousClock()
        let elapsed = clock.measure { #expect(Self.map(mapper, "\(name):1|c") == "unchanged") }
        #expect(elapsed < .seconds(5), "generous: the exponential match takes hours")
    }

    @Test func theFirstMatchingRuleDecides() {
        let mapper = Mapper(rules: [
            Self.rule("a.*", name: "first"), Self.rule("a.b", name: "second"), Self.rule("*.b", action: .drop),
        ])
        #expect(Self.map(mapper, "a.b:1|c") == "first")
        #expect(Self.map(mapper, "c.b:1|c") == "drop")
        #expect(Self.map(mapper, "c.d:1|c") == "unchanged")
    }

    @Test func aRuleCanBeForOneKindOrTheSampledOnes() {
        let mapper = Mapper(rules: [
            Self.rule("x.*", kinds: [.timer, .histogram, .distribution], name: "observed"),
            Self.rule("x.*", kinds: [.counter], name: "counted"),
        ])
        #expect(Self.map(mapper, "x.y:1|ms") == "observed")
        #expect(Self.map(mapper, "x.y:1|d") == "observed")
        #expect(Self.map(mapper, "x.y:1|c") == "counted")
        #expect(Self.map(mapper, "x.y:1|g") == "unchanged")
    }

    @Test func aRegexMatchesAnywhereUnlessAnchoredAndCapturesGroups() {
        let mapper = Mapper(rules: [
            Self.rule(#"^svc\.(\w+)\.(?<op>\w+)$"#, .regex, name: "svc.calls", labels: [("svc", "$1"), ("op", "$2")]),
            Self.rule(#"err(\d+)"#, .regex, name: "errors", labels: [("code", "$1"), ("match", "$0")]),
        ])
        #expect(Self.map(mapper, "svc.auth.login:1|c") == "svc.calls|#op:login,svc:auth")
        #expect(Self.map(mapper, "svc.auth.login.x:1|c") == "unchanged")
        #expect(Self.map(mapper, "http.err503.count:1|c") == "errors|#code:503,match:err503")
    }

    @Test func labelsReplaceTagsOfTheirKeyAndKeepTheOthersSorted() {
        let mapper = Mapper(rules: [Self.rule("a.*", name: "a", labels: [("env", "$1"), ("b", "x")])])
        #expect(Self.map(mapper, "a.prod:1|c|#env:dev,zone:1,env,b") == "a|#b:x,env:prod,zone:1")
        // Without a name, the line's name stays.
        let keep = Mapper(rules: [Self.rule("k.*", labels: [("kind", "$1")])])
        #expect(Self.map(keep, "k.v:1|c") == "k.v|#kind:v")
    }

    @Test func aCaptureThatWouldBreakATagIsCleaned() {
        let mapper = Mapper(rules: [Self.rule(#"^(.*)$"#, .regex, name: "n", labels: [("v", "$1")])])
        #expect(Self.map(mapper, "a,b#c:1|c") == "n|#v:a_b#c")
    }

    @Test func aRuleCannotMakeAnEmptyOrReservedName() {
        let mapper = Mapper(rules: [Self.rule("e.*", name: "$1"), Self.rule("r.*", name: "loopd.$1")])
        #expect(Self.map(mapper, "e.:1|c") == "invalid: \(LineError.emptyName)")
        #expect(Self.map(mapper, "r.series:1|g") == "invalid: \(LineError.reservedName)")
    }

    @Test(arguments: [
        (MappingRule.MatchType.glob, "", nil as String?, "match: the pattern is empty"),
        (.glob, "a..b", nil, "a glob has no empty component"),
        (.glob, "a.*", "x.$2", "$2 names no capture (the pattern has 1)"),
        (.glob, "a.*", "x.${1", "'${' must be followed by digits and '}'"),
        (.glob, "a.*", "x.$", "'$' must be followed by 0-9, {n} or $"),
        (.glob, "a.*", "x:y", "a name cannot contain \":\""),
        (.glob, "a:b", nil, "a name never contains \":\""),
        (.regex, "a(", nil, "not a regular expression"),
        (.regex, "(a)(b)", "$3", "$3 names no capture (the pattern has 2)"),
    ])
    func aBadRuleIsRefusedWithWhatIsWrong(type: MappingRule.MatchType, match: String, name: String?, message: String) {
        #expect {
            _ = try MappingRule(match: match, matchType: type, name: name)
        } throws: { error in
            "\(error)".contains(message)
        }
    }

    @Test func badPercentilesAndLabelsAreRefused() {
        for (percentiles, message) in [([0.0], "in (0, 100]"), ([101], "in (0, 100]"), ([50, 50], "50.0 given twice")] {
            #expect("\(percentiles)") {
                _ = try MappingRule(match: "a", percentiles: percentiles)
            } throws: { error in
                "\(error)".contains(message)
            }
        }
        #expect(throws: MappingError.self) { _ = try MappingRule(match: "a", labels: [("a,b", "x")]) }
        #expect(throws: MappingError.self) { _ = try MappingRule(match: "a", labels: [("a", "v,y")]) }
        #expect(throws: MappingError.self) { _ = try MappingRule(match: "a", labels: [("a", "v|y")]) }
        #expect(throws: MappingError.self) { _ = try MappingRule(match: "a", labels: [("a", "x"), ("a", "y")]) }
        #expect(throws: MappingError.self) { _ = try MappingRule(match: "a", action: .drop, name: "x") }
    }

    @Test func theGroupsOfARegexAreCounted() {
        for (pattern, groups) in [
            ("a", 0), ("(a)", 1), ("(?:a)(b)", 1), ("(?<x>a)(?P<y>b)(?'z'c)", 3), ("[\\]](x)", 1), (#"\(a\)"#, 0),
            ("[(]", 0),
            ("[)(]", 0), ("(?=a)(?!c)(d)", 1),
        ] {
            let rule = try? MappingRule(match: pattern, matchType: .regex, name: groups == 0 ? "x" : "$\(groups)")
            #expect(rule != nil, "\(pattern) has \(groups) groups")
            let over = try? MappingRule(match: pattern, matchType: .regex, name: "$\(groups + 1)")
            #expect(over == nil, "\(pattern) has no group \(groups + 1)")
        }
    }

    // MARK: Through the ingest stage

    @Test func mappedLinesAggregateIntoTheMappedSeriesAndDropsAreCounted() {
        let mapper = Mapper(rules: [
            Self.rule("api.*.requests", name: "api.requests", labels: [("endpoint", "$1")]),
            Self.rule("debug.*", action: .drop), Self.rule("bad.*", name: "loopd.$1"),
        ])
        let ingest = Ingest(maxLineLength: 1024, maxSeries: 100, mapper: mapper)
        feed(ingest, "api.users.requests:1|c\napi.users.requests:2|c\napi.items.requests:5|c|#a:b\n")
        feed(ingest, "debug.x:1|c\ndebug.y:1|ms\nother:1|c\nbad.x:1|c\n")
        let flushed = flush(ingest)
        #expect(
            flushed.counters == [
                "api.requests|#endpoint:users": 3, "api.requests|#a:b,endpoint:items": 5, "other": 1,
            ])
        #expect(ingest.counts.mappingDropped == 2)
        #expect(ingest.counts.badLines == 1, "a rule that makes a reserved name is a bad line")
        #expect(ingest.counts.lines == 7)
    }

    @Test func twoNamesMappedToOneSeriesAddUp() {
        let mapper = Mapper(rules: [Self.rule("host*.cpu", name: "cpu")])
        let ingest = Ingest(maxLineLength: 1024, maxSeries: 100, mapper: mapper)
        feed(ingest, "host1.cpu:1|c\nhost2.cpu:2|c\nhost1.cpu:4|c")
        #expect(flush(ingest).counters == ["cpu": 7])
    }

    @Test func theCacheIsBoundedInBytesToo() {
        // 4,000 keys of 32 KiB (and as much mapped) pass the cache's 64 MiB: it is emptied.
        let ingest = Ingest(
            maxLineLength: 65536, maxSeries: 100_000, mapper: Mapper(rules: [Self.rule("k.*", name: "k.$1")]))
        let long = String(repeating: "x", count: 32 * 1024)
        for key in 0..<1100 { feed(ingest, "k.\(key)\(long):1|c\n") }
        #expect(ingest.counts.mappingCacheClears >= 1)
        #expect(ingest.mappingCacheBytes < 200 << 20)
    }

    @Test func theCacheIsBoundedAndClearedWhenFullWithoutChangingResults() {
        let mapper = Mapper(rules: [Self.rule("k.*", name: "all")])
        let ingest = Ingest(maxLineLength: 1024, maxSeries: 3, mapper: mapper)
        #expect(ingest.mappingCacheCapacity == 6)
        for round in 0..<3 {
            for key in 0..<20 { feed(ingest, "k.\(key):1|c\n") }
            #expect(flush(ingest).counters == ["all": 20], "round \(round)")
        }
        #expect(ingest.counts.mappingCacheClears >= 9, "60 distinct keys through 6 places")
        #expect(ingest.mappingCacheBytes < 64 * 1024)
    }

    @Test func aRulesPercentilesApplyToItsSeriesOnly() throws {
        let mapper = Mapper(rules: [Self.rule("slow.*", name: "slow", percentiles: [99.9, 10])])
        let ingest = Ingest(maxLineLength: 1024, maxSeries: 100, mapper: mapper)
        var lines = ""
        for value in 1...1000 { lines += "slow.a:\(value)|ms\nfast:\(value)|ms\n" }
        feed(ingest, lines)
        let flushed = flush(ingest)
        let slow = try #require(flushed.stats["slow"]).stats.percentiles
        #expect(slow == [.init(p: 99.9, value: 999), .init(p: 10, value: 100)])
        #expect(slow.map(\.name) == ["p99_9", "p10"])
        let fast = try #require(flushed.stats["fast"]).stats.percentiles
        #expect(fast.map(\.p) == [50, 90, 95, 99])
    }

    @Test func aReloadMapsNewLinesByTheNewRulesAndLeavesOldSeriesToExpire() {
        let ingest = Ingest(maxLineLength: 1024, maxSeries: 100, mapper: Mapper(rules: [Self.rule("a.*", name: "old")]))
        feed(ingest, "a.x:1|c\n")
        ingest.setMapper(Mapper(rules: [Self.rule("a.*", name: "new", percentiles: [75])]))
        feed(ingest, "a.x:2|c\na.y:1|ms\n")
        let flushed = flush(ingest)
        #expect(flushed.counters == ["old": 1, "new": 2], "nothing lost across the reload")
        #expect(flushed.stats["new"]?.stats.percentiles.map(\.p) == [75])
        ingest.setMapper(nil)
        feed(ingest, "a.x:4|c\n")
        #expect(flush(ingest).counters["a.x"] == 4, "no rules: lines as they came")
    }

    @Test func aSeriesShowsThePercentilesOfTheRuleThatMappedItsLatestLine() {
        let ingest = Ingest(
            maxLineLength: 1024, maxSeries: 100, mapper: Mapper(rules: [Self.rule("t.*", name: "t", percentiles: [50])])
        )
        feed(ingest, "t.a:1|ms\n")
        ingest.setMapper(Mapper(rules: [Self.rule("t.*", name: "t", percentiles: [20, 80])]))
        feed(ingest, "t.a:2|ms\n")
        #expect(flush(ingest).stats["t"]?.stats.percentiles.map(\.p) == [20, 80])
    }

    // MARK: The namespace

    @Test func thePrefixesAndTagsOfTheNamespaceApplyToEveryLine() {
        let mapper = Mapper(
            rules: [Self.rule("api.*", name: "api", labels: [("route", "$1"), ("env", "rule")])], prefix: "app",
            kindPrefixes: [.counter: "counters", .timer: "timers"], tags: ["env:prod", "host:web1", "canary"])
        #expect(mapper.isIdentity == false && Mapper().isIdentity)
        #expect(Self.map(mapper, "x:1|c") == "app.counters.x|#canary,env:prod,host:web1")
        #expect(Self.map(mapper, "x:1|g") == "app.x|#canary,env:prod,host:web1")
        #expect(Self.map(mapper, "x:1|ms|#host:db2") == "app.timers.x|#canary,env:prod,host:db2", "the line's tag wins")
        #expect(Self.map(mapper, "api.users:1|c") == "app.counters.api|#canary,env:rule,host:web1,route:users")
        let reserved = Mapper(kindPrefixes: [.gauge: "loopd"])
        #expect(Self.map(reserved, "x:1|g") == "invalid: \(LineError.reservedName)")
    }

    @Test func aNamespaceLineCarriesTheGlobalPercentiles() throws {
        let ingest = Ingest(maxLineLength: 1024, maxSeries: 10, mapper: Mapper(prefix: "p"))
        feed(ingest, "t:1|ms\n")
        #expect(flush(ingest).stats["p.t"]?.stats.percentiles.map(\.p) == [50, 90, 95, 99])
    }

    @Test(arguments: [
        ("a:b", true), ("a|b", true), ("a,b", true), ("a b", true), ("a#", true), ("loopd", true),
        ("LOOPD", true), ("loopdx", false), ("app.v2", false), ("", false),
    ])
    func aPrefixThatWouldBreakALineOrTakeLoopdsNamesIsRefused(prefix: String, refused: Bool) {
        #expect((Mapper.prefixProblem(prefix) != nil) == refused)
    }

    @Test func aTagToAddIsKeyValueOrKey() {
        #expect(Mapper.tagProblem("host:web1") == nil && Mapper.tagProblem("canary") == nil)
        for bad in ["", ":x", "a,b", "a|b", "a b", "#a"] { #expect(Mapper.tagProblem(bad) != nil, "\(bad)") }
    }
}
