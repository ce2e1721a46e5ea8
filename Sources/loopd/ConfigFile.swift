import LoopdCore

#if canImport(Glibc)
    import Glibc
#endif

/// loopd's config file (`--config`): YAML whose top-level keys are the flags' names without
/// `--` (`port: 8125`, `flush-interval: 10`), plus `percentiles` and `mappings`. A flag given on
/// the command line overrides the file's value.
///
/// YAML rather than TOML: the mapping rules are a list of small maps, which YAML writes
/// without repeating a table header per rule, and statsd_exporter's users, whose mapping files
/// are YAML, can bring their rules over with few edits. It is read by `YAML`, loopd's own
/// parser of the YAML a config file needs, which refuses the rest with its line: a YAML library
/// would bring the whole of Foundation into the process, more than doubling its idle memory.
///
/// Every problem is reported with the file, the line and the key, and the whole file is
/// refused: no setting of a file with a problem is used.
struct ConfigFile {
    typealias Node = YAML.Node

    /// A value and the line it is on.
    struct Entry {
        var node: Node
        var line: Int
    }

    /// The file's path, as given.
    let path: String
    /// The top-level settings by key, with their lines (`mappings` apart).
    let entries: [String: Entry]
    /// The mapping rules, in order.
    let mappings: [MappingRule]

    /// The largest file read: a config file is a few kilobytes.
    static let maxBytes = 1 << 20

    /// The top-level keys a file may have, besides `mappings`.
    static let keys: Set<String> = [
        "host", "port", "udp-buffer", "udp-read-pause", "max-line", "flush-interval", "output", "graphite",
        "prometheus",
        "prometheus-timers", "prometheus-buckets", "unix-socket", "unix-stream", "unix-socket-mode", "max-series",
        "expire-after",
        "tcp-idle-timeout", "graphite-max-queued", "log-level", "percentiles", "prefix", "prefix-counter",
        "prefix-gauge", "prefix-timer", "prefix-histogram", "prefix-set", "tags", "graphite-layout", "readers",
    ]

    /// A problem with the file, naming it, the line and the key.
    struct Problem: Error, CustomStringConvertible {
        var description: String
    }

    /// Reads and checks the file at `path`.
    static func load(_ path: String) throws(Problem) -> ConfigFile {
        let text = try read(path)
        return try parse(text, path: path)
    }

    /// Checks a file's text; `path` names it in messages.
    static func parse(_ text: String, path: String) throws(Problem) -> ConfigFile {
        let root: Node?
        do {
            root = try YAML.parse(text)
        } catch {
            throw Problem(description: "\(path):\(error.line): not valid YAML: \(error.reason)")
        }
        guard let root else { return ConfigFile(path: path, entries: [:], mappings: []) }
        guard case let .mapping(top, _) = root else {
            throw Problem(
                description: "\(path):\(line(root)): expected keys and values (such as port: 8125) at the top")
        }
        var entries = [String: Entry]()
        var mappings = [MappingRule]()
        for (keyNode, value) in top.map({ ($0.key, $0.value) }) {
            guard let key = keyNode.string else {
                throw Problem(description: "\(path):\(line(keyNode)): a key must be a plain word")
            }
            guard entries[key] == nil && !(key == "mappings" && !mappings.isEmpty) else {
                throw Problem(description: "\(path):\(line(keyNode)): \(key) is given twice")
            }
            if key == "mappings" {
                mappings = try rules(value, path: path)
                continue
            }
            guard keys.contains(key) else {
                throw Problem(
                    description:
                        "\(path):\(line(keyNode)): unknown key \(Mapper.shown(key)); the keys are \(keys.sorted().joined(separator: ", ")) and mappings"
                )
            }
            entries[key] = Entry(node: value, line: line(value))
        }
        return ConfigFile(path: path, entries: entries, mappings: mappings)
    }

    /// Where a value came from, for messages: `loopd.yaml:3: port`.
    func origin(_ key: String) -> String {
        "\(path):\(entries[key]?.line ?? 0): \(key)"
    }

    /// The scalar text of `key`, if the file sets it (a null value, `~` or nothing, does not);
    /// throws if it is a list or a map.
    func string(_ key: String) throws(Problem) -> String? {
        guard let entry = entries[key], !entry.node.isNull else { return nil }
        guard let text = entry.node.string else {
            throw Problem(description: "\(origin(key)): expected one value, not a list or a map")
        }
        return text
    }

    /// The integer value of `key`, if the file sets it.
    func int(_ key: String) throws(Problem) -> Int? {
        guard let text = try string(key) else { return nil }
        guard let value = Int(text.replacingUnderscores()) else {
            throw Problem(description: "\(origin(key)): expected a whole number, got \(Mapper.shown(text))")
        }
        return value
    }

    /// The number value of `key`, if the file sets it.
    func double(_ key: String) throws(Problem) -> Double? {
        guard let text = try string(key) else { return nil }
        guard let value = Self.decimal(text) else {
            throw Problem(description: "\(origin(key)): expected a number, got \(Mapper.shown(text))")
        }
        return value
    }

    /// A list of numbers for `key`: a YAML list, or one comma-separated string as the flag takes.
    func numbers(_ key: String) throws(Problem) -> [Double]? {
        guard let entry = entries[key], !entry.node.isNull else { return nil }
        return try Self.numbers(entry.node, what: origin(key))
    }

    /// A list of strings for `key`: a YAML list, or a map (`host: web1` becomes `host:web1`).
    func tagList(_ key: String) throws(Problem) -> [String]? {
        guard let entry = entries[key], !entry.node.isNull else { return nil }
        var tags = [String]()
        switch entry.node {
        case let .sequence(items, _):
            for item in items {
                guard let text = item.string else {
                    throw Problem(description: "\(path):\(Self.line(item)): \(key): expected tags")
                }
                if let problem = Mapper.tagProblem(text) {
                    throw Problem(description: "\(path):\(Self.line(item)): \(key): each tag \(problem)")
                }
                tags.append(text)
            }
        case let .mapping(pairs, _):
            for (name, value) in pairs.map({ ($0.key, $0.value) }) {
                guard let tagName = name.string, !tagName.contains(":"), let text = value.string else {
                    throw Problem(
                        description:
                            "\(path):\(Self.line(name)): \(key): expected tags as name: value, a name without ':'")
                }
                // `canary:` or `canary: ~` is a tag without a value.
                let isNull = value.isNull || text.isEmpty
                let tag = isNull ? tagName : "\(tagName):\(text)"
                if let problem = Mapper.tagProblem(tag) {
                    throw Problem(description: "\(path):\(Self.line(name)): \(key): each tag \(problem)")
                }
                tags.append(tag)
            }
        default:
            throw Problem(description: "\(origin(key)): expected a list of tags (- host:web1) or a map (host: web1)")
        }
        return tags
    }

    static func numbers(_ node: Node, what: String) throws(Problem) -> [Double] {
        var texts = [String]()
        if case let .sequence(items, _) = node {
            for item in items {
                guard let text = item.string, Self.decimal(text) != nil else {
                    throw Problem(
                        description:
                            "\(what) (line \(line(item))): expected numbers, got \(item.string.map(Mapper.shown) ?? "a list or a map")"
                    )
                }
                texts.append(text)
            }
        } else if let text = node.string {
            texts = text.split(separator: ",", omittingEmptySubsequences: false).map {
                String($0.drop(while: { $0 == " " }).reversed().drop(while: { $0 == " " }).reversed())
            }
        } else {
            throw Problem(description: "\(what): expected a list of numbers")
        }
        var numbers = [Double]()
        for text in texts {
            guard let number = decimal(text) else {
                throw Problem(description: "\(what): expected numbers, got \(Mapper.shown(text))")
            }
            numbers.append(number)
        }
        return numbers
    }

    /// A finite number written in decimal (`1.5`, `-2`, `1e3`), or nil: Swift's `Double(_:)`
    /// also reads hexadecimal (`0x1p3`), `inf` and `nan`, which a config file does not mean.
    static func decimal(_ text: String) -> Double? {
        guard !text.isEmpty, text.utf8.allSatisfy({ "0123456789+-.eE".utf8.contains($0) }),
            let number = Double(text), number.isFinite
        else { return nil }
        return number
    }

    // MARK: Rules

    /// The keys of a mapping rule: statsd_exporter's names, so that its mapping files come
    /// over with few edits.
    static let ruleKeys: Set<String> = [
        "match", "match_type", "match_metric_type", "action", "name", "labels", "percentiles", "buckets",
    ]

    private static func rules(_ node: Node, path: String) throws(Problem) -> [MappingRule] {
        // `mappings:` with every rule commented out: no rule.
        if node.isNull { return [] }
        guard case let .sequence(items, _) = node else {
            throw Problem(
                description: "\(path):\(line(node)): mappings: expected a list of rules (each line starting with -)")
        }
        guard items.count <= Self.maxRules else {
            throw Problem(
                description: "\(path):\(line(node)): mappings: at most \(Self.maxRules) rules, got \(items.count)")
        }
        var rules = [MappingRule]()
        for item in items { rules.append(try rule(item, path: path)) }
        return rules
    }

    /// The most mapping rules a file may have: each new key runs through them in order.
    static let maxRules = 10_000

    private static func rule(_ node: Node, path: String) throws(Problem) -> MappingRule {
        let at = "\(path):\(line(node)): mapping rule"
        guard case let .mapping(fields, _) = node else {
            throw Problem(description: "\(at): expected keys such as match: and name:")
        }
        var values = [String: Node]()
        for (keyNode, value) in fields.map({ ($0.key, $0.value) }) {
            guard let key = keyNode.string, ruleKeys.contains(key) else {
                throw Problem(
                    description:
                        "\(path):\(line(keyNode)): unknown mapping rule key \(Mapper.shown(keyNode.string ?? "")); the keys are \(ruleKeys.sorted().joined(separator: ", "))"
                )
            }
            guard values[key] == nil else {
                throw Problem(description: "\(path):\(line(keyNode)): \(key) is given twice")
            }
            values[key] = value
        }
        func text(_ key: String) throws(Problem) -> String? {
            guard let node = values[key], !node.isNull else { return nil }
            guard let text = node.string else {
                throw Problem(description: "\(path):\(line(node)): \(key): expected one value, not a list or a map")
            }
            return text
        }
        guard let match = try text("match") else { throw Problem(description: "\(at): match is required") }
        let matchType = try text("match_type").map { (value) throws(Problem) -> MappingRule.MatchType in
            guard let type = MappingRule.MatchType(rawValue: value) else {
                throw Problem(
                    description:
                        "\(path):\(line(values["match_type"]!)): match_type must be glob or regex, got \(Mapper.shown(value))"
                )
            }
            return type
        }
        let kinds = try text("match_metric_type").map { (value) throws(Problem) -> [MetricKind] in
            guard let kinds = metricKinds[value] else {
                throw Problem(
                    description:
                        "\(path):\(line(values["match_metric_type"]!)): match_metric_type must be one of \(metricKinds.keys.sorted().joined(separator: ", ")), got \(Mapper.shown(value))"
                )
            }
            return kinds
        }
        let action = try text("action").map { (value) throws(Problem) -> MappingRule.Action in
            guard let action = MappingRule.Action(rawValue: value) else {
                throw Problem(
                    description:
                        "\(path):\(line(values["action"]!)): action must be map or drop, got \(Mapper.shown(value))")
            }
            return action
        }
        var labels = [(key: String, value: String)]()
        if let node = values["labels"] {
            guard case let .mapping(pairs, _) = node else {
                throw Problem(description: "\(path):\(line(node)): labels: expected keys and values")
            }
            for (key, value) in pairs.map({ ($0.key, $0.value) }) {
                guard let name = key.string, let text = value.string, !value.isNull else {
                    throw Problem(
                        description: "\(path):\(line(key)): labels: each label is a name and one value, not null")
                }
                labels.append((name, text))
            }
        }
        let percentiles = try values["percentiles"].map { (node) throws(Problem) in
            try numbers(node, what: "\(path):\(line(node)): percentiles")
        }
        let buckets = try values["buckets"].map { (node) throws(Problem) in
            try numbers(node, what: "\(path):\(line(node)): buckets")
        }
        let name = try text("name")
        do {
            return try MappingRule(
                match: match, matchType: matchType ?? .glob, kinds: kinds, action: action ?? .map,
                name: name, labels: labels, percentiles: percentiles, buckets: buckets)
        } catch {
            // The line of the key the problem names, if it names one.
            let key = "\(error)".prefix { $0 != " " && $0 != ":" && $0 != "." }
            let node = values[String(key)] ?? node
            throw Problem(description: "\(path):\(line(node)): mapping rule: \(error)")
        }
    }

    /// `match_metric_type`'s values: the kinds' names, and statsd_exporter's `observer` for the
    /// sampled kinds.
    static let metricKinds: [String: [MetricKind]] = [
        "counter": [.counter], "gauge": [.gauge], "timer": [.timer], "histogram": [.histogram],
        "distribution": [.distribution], "set": [.set], "observer": [.timer, .histogram, .distribution],
    ]

    static func line(_ node: Node) -> Int { node.line }

    /// The file's text, at most `maxBytes`.
    private static func read(_ path: String) throws(Problem) -> String {
        // Without blocking: opening a FIFO for reading would wait for a writer, with the loop.
        let descriptor = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
        guard descriptor >= 0 else {
            throw Problem(description: "\(path): cannot read it: \(String(cString: strerror(errno)))")
        }
        defer { close(descriptor) }
        var status = stat()
        guard fstat(descriptor, &status) == 0, status.st_mode & S_IFMT == S_IFREG else {
            throw Problem(
                description: "\(path): not a regular file (a FIFO, a device or a directory cannot be read whole)")
        }
        var bytes = [UInt8]()
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = chunk.withUnsafeMutableBytes { Glibc.read(descriptor, $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            guard count >= 0 else {
                throw Problem(description: "\(path): cannot read it: \(String(cString: strerror(errno)))")
            }
            if count == 0 { break }
            bytes += chunk[..<count]
            guard bytes.count <= maxBytes else {
                throw Problem(description: "\(path): larger than \(maxBytes) bytes; a config file is a few kilobytes")
            }
        }
        guard let text = String(validating: bytes, as: UTF8.self) else {
            throw Problem(description: "\(path): not UTF-8 text")
        }
        return text
    }
}

extension String {
    /// Without the `_` digit separators YAML allows in numbers (`100_000`).
    fileprivate func replacingUnderscores() -> String { String(filter { $0 != "_" }) }
}
