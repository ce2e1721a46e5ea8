import Testing
@testable import ReactiveLoopCore

/// A flattened `ValidatingProperty.Result`, comparable in tests.
enum Outcome: Equatable {
    case valid(Int)
    case coerced(Int, proposed: Int)
    case invalid(Int)

    init(_ result: ValidatingProperty<Int, TestError>.Result) {
        switch result {
        case let .valid(value): self = .valid(value)
        case let .coerced(replacement, proposed, _): self = .coerced(replacement, proposed: proposed)
        case let .invalid(value, _): self = .invalid(value)
        }
    }
}

@Suite("ValidatingProperty")
struct ValidatingPropertyTests {
    /// Non-negative values are valid, 100 is coerced to 99, negative ones are invalid.
    static func validate(_ value: Int) -> ValidatingProperty<Int, TestError>.Decision {
        if value < 0 { return .invalid(TestError(code: value)) }
        return value == 100 ? .coerced(99, TestError(code: 100)) : .valid
    }

    @Test func validCoercedAndInvalidProposals() {
        let root = MutableProperty(0)
        let validated = ValidatingProperty(root, Self.validate)
        var outcomes: [Outcome] = []
        validated.result.signal.observeValues { outcomes.append(Outcome($0)) }
        #expect(Outcome(validated.result.value) == .valid(0))

        validated.value = 10
        #expect(root.value == 10)
        validated.value = 100
        #expect(validated.value == 99)
        #expect(validated.result.value.error == TestError(code: 100))
        validated.value = -5
        #expect(validated.value == 99)
        #expect(validated.result.value.isInvalid)
        #expect(validated.result.value.value == nil)
        #expect(outcomes == [.valid(10), .coerced(99, proposed: 100), .invalid(-5)])
    }

    @Test func changesMadeToTheInnerPropertyAreValidatedNotRewritten() {
        let root = MutableProperty(0)
        let validated = ValidatingProperty(root, Self.validate)
        root.value = -3
        #expect(validated.value == -3)
        #expect(Outcome(validated.result.value) == .invalid(-3))
        root.value = 4
        #expect(Outcome(validated.result.value) == .valid(4))
    }

    @Test func theInitialValueNeedNotBeValid() {
        let validated = ValidatingProperty(-1, Self.validate)
        #expect(validated.value == -1)
        #expect(Outcome(validated.result.value) == .invalid(-1))
    }

    @Test func keepsItsInnerPropertyButNotItsDependency() {
        weak var weakRoot: MutableProperty<Int>?
        weak var weakOther: MutableProperty<Bool>?
        var validated: ValidatingProperty<Int, TestError>?
        do {
            let root = MutableProperty(0)
            let other = MutableProperty(true)
            weakRoot = root
            weakOther = other
            validated = ValidatingProperty(root, with: other) { value, allowed in
                allowed ? .valid : .invalid(TestError(code: value))
            }
        }
        #expect(weakRoot != nil)
        #expect(weakOther == nil)
        validated = nil
        #expect(weakRoot == nil)
    }

    @Test func aDependencyChangeRevalidatesTheLastProposal() {
        let allowed = MutableProperty(false)
        let validated = ValidatingProperty(0, with: allowed) { value, allowed in
            allowed ? Self.validate(value) : .invalid(TestError(code: 0))
        }
        validated.value = 100
        #expect(validated.value == 0)
        #expect(Outcome(validated.result.value) == .invalid(100))
        allowed.value = true
        #expect(validated.value == 99)
        #expect(Outcome(validated.result.value) == .coerced(99, proposed: 100))
    }

    @Test func aValidatingDependencyRevalidatesWithItsLastProposal() {
        let password = ValidatingProperty("", { $0.count >= 3 ? .valid : .invalid(TestError(code: $0.count)) })
        let confirmation = ValidatingProperty("", with: password) { value, password in
            value == password ? .valid : .invalid(TestError(code: 1))
        }
        confirmation.value = "abc"
        #expect(confirmation.result.value.isInvalid)
        // The dependency's proposal counts even though it is the one that was valid.
        password.value = "abc"
        #expect(confirmation.result.value.value == "abc")
        password.value = "ab"
        #expect(password.value == "abc")
        #expect(confirmation.result.value.isInvalid)
    }

    @Test func actionsEnabledByValidatedAndUnwrappedState() {
        let amount = ValidatingProperty(-1, Self.validate)
        let double = Action(validated: amount) { (value: Int) in SignalProducer<Int, Never>(value: value * 2) }
        #expect(!double.isEnabled.value)
        amount.value = 21
        #expect(double.isEnabled.value)
        var results: [Int] = []
        double.values.observeValues { results.append($0) }
        double.apply().start()
        #expect(results == [42])

        let name = MutableProperty<String?>(nil)
        let greet = Action(unwrapping: name) { (name: String, punctuation: String) in
            SignalProducer<String, Never>(value: "hello \(name)\(punctuation)")
        }
        #expect(!greet.isEnabled.value)
        name.value = "loop"
        var greetings: [String] = []
        greet.values.observeValues { greetings.append($0) }
        greet.apply("!").start()
        #expect(greetings == ["hello loop!"])
    }
}
