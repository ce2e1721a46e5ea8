import LoopdCore
import Testing

@Suite("The config file's YAML")
struct YAMLTests {
    typealias Node = YAML.Node

    /// A compact form of a node: scalars as their text (null as `~`), lists in [ ], maps in { }.
    func shape(_ node: Node?) -> String {
        switch node {
        case nil: return "none"
        case let .scalar(text, _, isNull)?: return isNull ? "~" : text
        case let .sequence(items, _)?: return "[" + items.map(shape).joined(separator: ",") + "]"
        case let .mapping(pairs, _)?:
            return "{" + pairs.map { shape($0.key) + "=" + shape($0.value) }.joined(separator: ",") + "}"
        }
    }

    func parsed(_ text: String) throws -> String { shape(try YAML.parse(text)) }

    @Test(arguments: [
        ("", "none"),
        ("# only a comment\n\n", "none"),
        ("---\n", "none"),
        ("port: 8125\n", "{port=8125}"),
        ("port: 8125", "{port=8125}"),
        ("\u{FEFF}port: 1\r\nhost: a\r\n", "{port=1,host=a}"),
        ("---\nport: 1 # a comment\n...\n", "{port=1}"),
        ("a: b#c\nd: 'e # f'\n", "{a=b#c,d=e # f}"),
        ("url: http://x:80/y\n", "{url=http://x:80/y}"),
        ("a:\nb: ~\nc: null\nd: ''\ne: \"\"\n", "{a=~,b=~,c=~,d=,e=}"),
        ("list: [1, 2.5, x y, 'q,r', \"s]\"]\n", "{list=[1,2.5,x y,q,r,s]]}"),
        ("list: [a, b,]\n", "{list=[a,b]}"),
        ("m: {a: 1, 'b': [2, 3], c: {d: e}}\n", "{m={a=1,b=[2,3],c={d=e}}}"),
        ("m: {a: , b: 2}\n", "{m={a=~,b=2}}"),
        ("list: [\n  1,   # one\n  2\n]\n", "{list=[1,2]}"),
        ("l:\n  - a\n  - b\n", "{l=[a,b]}"),
        ("l:\n- a\n- b\nnext: 1\n", "{l=[a,b],next=1}"),
        ("l:\n  -\n  - x\n", "{l=[~,x]}"),
        (
            "mappings:\n  - match: a.*\n    name: b\n  - match: c\n    labels:\n      k: $1\n",
            "{mappings=[{match=a.*,name=b},{match=c,labels={k=$1}}]}"
        ),
        ("- - a\n  - b\n- c\n", "[[a,b],c]"),
        ("a:\n  b:\n    c: 1\n  d: 2\ne: 3\n", "{a={b={c=1},d=2},e=3}"),
        ("q: 'it''s'\nd: \"tab\\tnl\\n\\x41\\u00e9\\U0001F600\\\\\\\"\"\n", "{q=it's,d=tab\tnl\nAé😀\\\"}"),
        ("match: '^db\\.(\\w+)$'\n", "{match=^db\\.(\\w+)$}"),
        ("\"quoted key\": 1\n", "{quoted key=1}"),
        ("unicode: ключ значение\n", "{unicode=ключ значение}"),
        ("n: -5\nt: :x\n", "{n=-5,t=:x}"),
        ("scalar\n", "scalar"),
    ])
    func readsWhatAConfigFileHolds(text: String, expected: String) throws {
        #expect(try parsed(text) == expected)
    }

    @Test func eachNodeKnowsItsLine() throws {
        let root = try #require(
            try YAML.parse("# head\nport: 1\nmappings:\n  - match: a\n\n    name: b\ntags: [x,\n  y]\n"))
        guard case let .mapping(pairs, line) = root else {
            Issue.record("not a map")
            return
        }
        #expect(line == 2)
        #expect(pairs.map(\.key.line) == [2, 3, 7])
        #expect(pairs[0].value.line == 2)
        guard case let .sequence(rules, _) = pairs[1].value, case let .mapping(rule, ruleLine) = rules[0] else {
            Issue.record("no rule")
            return
        }
        #expect(ruleLine == 4 && rule.map(\.value.line) == [4, 6])
        guard case let .sequence(tags, _) = pairs[2].value else {
            Issue.record("no tags")
            return
        }
        #expect(tags.map(\.line) == [7, 8])
    }

    @Test(arguments: [
        ("a: 1\na: 2\n", 2, "the key \"a\" is given twice (first on line 1)"),
        ("m: {x: 1, x: 2}\n", 1, "is given twice"),
        ("a: &anchor 1\n", 1, "anchors and aliases"),
        ("a: *alias\n", 1, "anchors and aliases"),
        ("a: !!str 1\n", 1, "tags (!) are not read"),
        ("a: |\n  text\n", 1, "block scalars"),
        ("a: >\n  text\n", 1, "block scalars"),
        ("? a\n: b\n", 1, "complex keys"),
        ("%YAML 1.2\n---\na: 1\n", 1, "directives"),
        ("a: 1\n---\nb: 2\n", 2, "a second document"),
        ("a: 1\n  b: 2\n", 2, "unexpected indentation"),
        ("a: plain\n  continued\n", 2, "unexpected indentation"),
        ("a:\n\tb: 1\n", 2, "a tab in the indentation"),
        ("a: 'open\n", 1, "must end on its line"),
        ("a: \"open\n", 1, "must end on its line"),
        ("a: \"\\q\"\n", 1, "not an escape"),
        ("a: \"\\u12\"\n", 1, "hexadecimal digits"),
        ("a: \"\\uD800\"\n", 1, "hexadecimal digits"),
        ("a: [1, 2\nb: 3\n", 2, "expected , or ] in the list or map opened on line 1"),
        ("a: [1, 2\n", 1, "is not closed"),
        ("a: ['x' 1]\n", 1, "expected , or ]"),
        ("a: [1,, 2]\n", 1, "an empty entry"),
        ("a: [x: 1]\n", 1, "use { } for a map"),
        ("a: b: c\n", 1, "a map cannot start on its key's line"),
        ("a: - b\n", 1, "a list cannot start on its key's line"),
        ("- a\nb: 1\n", 2, "continues nothing"),
        ("a: 1\n- b\n", 2, "a list item where a key"),
        ("[a]: 1\n", 1, "cannot be a key"),
        ("a: ]\n", 1, "closes nothing"),
        ("a: @x\n", 1, "cannot start with @"),
        ("a: 1 extra: 2\n", 1, "a map cannot start"),
        ("l:\n  - a\n   - b\n", 3, "unexpected indentation"),
        ("\ta: 1\n", 1, "a tab in the indentation"),
        ("\n\n  \ta: 1\n", 3, "a tab in the indentation"),
        ("a: \"\\x+9\"\n", 1, "hexadecimal digits"),
        ("a: \"\\u+041\"\n", 1, "hexadecimal digits"),
        ("a: \"\\é\"\n", 1, "a \\ before a non-ASCII character"),
        ("v: ? x\n", 1, "complex keys"),
        ("m: {? a : b}\n", 1, "complex keys"),
        ("a: 1\nb: x\u{0}y\n", 2, "U+0000 is a control character"),
        ("a: 1\rb: x\u{7F}\n", 2, "U+007F is a control character"),
        ("a: x\u{85}y\n", 1, "U+0085"),
        ("a: 1\r\n\r\nb: x\u{2029}\n", 3, "U+2029"),
    ])
    func whatItDoesNotReadIsRefusedWithItsLine(text: String, line: Int, reason: String) {
        do {
            _ = try YAML.parse(text)
            Issue.record("\(text.debugDescription) was read")
        } catch {
            #expect(error.line == line, "\(text.debugDescription): \(error)")
            #expect(error.reason.contains(reason), "\(text.debugDescription): \(error)")
        }
    }

    @Test func nestingIsBoundedAndLargeInputIsRead() throws {
        let deep = String(repeating: "[", count: 10_000) + String(repeating: "]", count: 10_000)
        #expect(throws: YAML.Error.self) { try YAML.parse("a: " + deep) }
        var blocks = ""
        for level in 0..<100 { blocks += String(repeating: " ", count: level * 2) + "k\(level):\n" }
        #expect(throws: YAML.Error.self) { try YAML.parse(blocks) }
        let nested = (0..<60).reduce("x") { inner, _ in "[\(inner)]" }
        #expect(try parsed("a: \(nested)\n").hasPrefix("{a=[[["))
        // 10,000 rules, as many as a config file may hold.
        let rules = (0..<10_000).map { "  - match: m\($0).*\n    name: n\($0)\n" }.joined()
        guard case let .mapping(pairs, _)? = try YAML.parse("mappings:\n" + rules),
            case let .sequence(items, _) = pairs[0].value
        else {
            Issue.record("not read")
            return
        }
        #expect(items.count == 10_000 && items.last.map(shape) == "{match=m9999.*,name=n9999}")
    }
}
