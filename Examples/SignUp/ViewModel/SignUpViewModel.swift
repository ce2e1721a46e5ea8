import ReactiveLoop

/// The account a sign-up creates.
public struct Account: Equatable, Sendable {
    /// The e-mail address the account was created with.
    public let email: String

    /// An account for `email`.
    public init(email: String) { self.email = email }
}

/// Why a sign-up failed.
public enum SignUpError: Error, Equatable, Sendable {
    /// The address is already taken.
    case emailTaken
    /// The service could not be reached.
    case unreachable
}

/// What the view model needs from the outside world: producers, so that a test can answer
/// them at once or on a `TestScheduler`.
public struct SignUpService: Sendable {
    /// Creates an account.
    public var createAccount: @Sendable (_ email: String, _ password: String) -> SignalProducer<Account, SignUpError>
    /// Sends a confirmation code to an address.
    public var sendCode: @Sendable (_ email: String) -> SignalProducer<(), Never>

    /// A service made of the two operations.
    public init(
        createAccount: @escaping @Sendable (String, String) -> SignalProducer<Account, SignUpError>,
        sendCode: @escaping @Sendable (String) -> SignalProducer<(), Never>
    ) {
        self.createAccount = createAccount
        self.sendCode = sendCode
    }
}

/// A headless view model of a sign-up form, in ReactiveLoop's idiom: inputs are mutable
/// properties a view binds to, outputs are read-only properties a view observes, and the
/// two things a user can do are actions.
///
/// - Validation: `emailError` and `passwordError` say what is wrong (or `nil`), and
///   `submit` is enabled only while both are `nil`.
/// - `submit` creates the account; `status` tells the user how it went.
/// - `resendCode` sends a confirmation code, then counts down `resendInterval` seconds on
///   the view model's scheduler (`resendCountdown`), during which it is disabled.
public final class SignUpViewModel {
    /// The e-mail address field.
    public let email = MutableProperty("")
    /// The password field.
    public let password = MutableProperty("")
    /// The password confirmation field.
    public let passwordConfirmation = MutableProperty("")

    /// What is wrong with the address, or `nil`.
    public let emailError: Property<String?>
    /// What is wrong with the password or its confirmation, or `nil`.
    public let passwordError: Property<String?>
    /// A line for the user about the last submission.
    public let status: Property<String>
    /// Seconds until a code can be sent again; 0 when it can.
    public let resendCountdown: Property<Int>

    /// Creates the account with the fields' values; enabled while the form is valid.
    public let submit: Action<Void, Account, SignUpError>
    /// Sends a code, then counts down; disabled until the countdown ends.
    public let resendCode: Action<Void, Int, Never>

    /// The shortest password accepted.
    public static let minimumPasswordLength = 8

    /// Creates the view model.
    ///
    /// - Parameters:
    ///   - service: Where accounts are created and codes sent.
    ///   - scheduler: The clock of the countdown (a `TestScheduler` in tests).
    ///   - resendInterval: How many seconds the countdown lasts.
    public init(service: SignUpService, scheduler: any DateScheduler, resendInterval: Int = 30) {
        emailError = email.map { email in
            if email.isEmpty { return "Enter your e-mail address" }
            let parts = email.split(separator: "@", omittingEmptySubsequences: false)
            guard parts.count == 2, !parts[0].isEmpty, parts[1].contains(".") else {
                return "\(email) is not an e-mail address"
            }
            return nil
        }.skipRepeats()
        passwordError = password.combineLatest(with: passwordConfirmation).map { password, confirmation in
            if password.count < SignUpViewModel.minimumPasswordLength {
                return "Use at least \(SignUpViewModel.minimumPasswordLength) characters"
            }
            return password == confirmation ? nil : "The passwords differ"
        }.skipRepeats()
        let isValid = emailError.combineLatest(with: passwordError).map { errors in errors.0 == nil && errors.1 == nil }
        let fields = email.combineLatest(with: password)

        // Enabled while the form is valid; the work gets the fields' values.
        submit = Action(state: isValid.combineLatest(with: fields), enabledIf: { $0.0 }) { state, _ in
            service.createAccount(state.1.0, state.1.1)
        }

        resendCode = Action(state: email) { email, _ in
            service.sendCode(email).then(
                SignalProducer.timer(interval: .seconds(1), on: scheduler)
                    .take(first: resendInterval)
                    .scan(resendInterval) { remaining, _ in remaining - 1 }
                    .prefix(value: resendInterval))
        }

        let countdown = MutableProperty(0)
        countdown <~ resendCode.values
        resendCountdown = Property(capturing: countdown)

        let status = MutableProperty("")
        status
            <~ Signal.merge(
                submit.values.map { "Welcome, \($0.email)" },
                submit.errors.map { error in
                    switch error {
                    case .emailTaken: return "That address already has an account"
                    case .unreachable: return "No connection; try again"
                    }
                },
                submit.isExecuting.signal.filter { $0 }.map { _ in "Creating your account…" })
        self.status = Property(capturing: status)
    }
}
