import ReactiveLoop
import SignUpViewModel
import Testing

/// The view model's tests, as a user of ReactiveLoop writes them: the service answers on a
/// `TestScheduler`, and time only moves when the test advances it.
@Suite("Sign-up view model")
struct SignUpViewModelTests {
    let scheduler = TestScheduler()
    let created = Box<[String]>([])
    let codes = Box<[String]>([])

    /// A service that answers after 1 second of virtual time; `taken@…` addresses fail.
    func makeViewModel(resendInterval: Int = 30) -> SignUpViewModel {
        let scheduler = self.scheduler
        let created = self.created
        let codes = self.codes
        let service = SignUpService(
            createAccount: { email, _ in
                SignalProducer<Account, SignUpError> { observer, lifetime in
                    lifetime += scheduler.schedule(after: .seconds(1)) {
                        if email.hasPrefix("taken@") {
                            observer.send(error: .emailTaken)
                        } else {
                            created.modify { $0.append(email) }
                            observer.send(value: Account(email: email))
                            observer.sendCompleted()
                        }
                    }
                }
            },
            sendCode: { email in SignalProducer(value: ()).on(completed: { codes.modify { $0.append(email) } }) })
        return SignUpViewModel(service: service, scheduler: scheduler, resendInterval: resendInterval)
    }

    func fill(_ viewModel: SignUpViewModel, email: String = "ada@example.com") {
        viewModel.email.value = email
        viewModel.password.value = "correct horse"
        viewModel.passwordConfirmation.value = "correct horse"
    }

    @Test func validationExplainsWhatIsWrongAndEnablesSubmitOnlyWhenAllIsRight() {
        let viewModel = makeViewModel()
        #expect(viewModel.emailError.value == "Enter your e-mail address")
        #expect(viewModel.passwordError.value == "Use at least 8 characters")
        #expect(!viewModel.submit.isEnabled.value)

        viewModel.email.value = "ada"
        #expect(viewModel.emailError.value == "ada is not an e-mail address")
        viewModel.email.value = "ada@example.com"
        #expect(viewModel.emailError.value == nil)

        viewModel.password.value = "short"
        #expect(viewModel.passwordError.value == "Use at least 8 characters")
        viewModel.password.value = "correct horse"
        #expect(viewModel.passwordError.value == "The passwords differ")
        #expect(!viewModel.submit.isEnabled.value)
        viewModel.passwordConfirmation.value = "correct horse"
        #expect(viewModel.passwordError.value == nil)
        #expect(viewModel.submit.isEnabled.value)

        viewModel.email.value = ""
        #expect(!viewModel.submit.isEnabled.value)
    }

    @Test func submittingCreatesTheAccountAndReportsProgressThenSuccess() {
        let viewModel = makeViewModel()
        fill(viewModel)
        let statuses = Box<[String]>([])
        viewModel.status.signal.observeValues { status in statuses.modify { $0.append(status) } }

        viewModel.submit.apply().start()
        #expect(viewModel.submit.isExecuting.value)
        #expect(!viewModel.submit.isEnabled.value)
        #expect(statuses.value == ["Creating your account…"])

        scheduler.advance(by: .milliseconds(999))
        #expect(created.value.isEmpty)
        scheduler.advance(by: .milliseconds(1))
        #expect(created.value == ["ada@example.com"])
        #expect(statuses.value == ["Creating your account…", "Welcome, ada@example.com"])
        #expect(viewModel.submit.isEnabled.value)
    }

    @Test func aFailedSubmissionSaysWhyAndLetsTheUserTryAgain() {
        let viewModel = makeViewModel()
        fill(viewModel, email: "taken@example.com")
        viewModel.submit.apply().start()
        scheduler.advance(by: .seconds(1))
        #expect(viewModel.status.value == "That address already has an account")
        #expect(viewModel.submit.isEnabled.value)

        viewModel.email.value = "grace@example.com"
        viewModel.submit.apply().start()
        scheduler.run()
        #expect(created.value == ["grace@example.com"])
        #expect(viewModel.status.value == "Welcome, grace@example.com")
    }

    @Test func submittingTwiceWhileTheFirstRunsIsRefused() {
        let viewModel = makeViewModel()
        fill(viewModel)
        viewModel.submit.apply().start()
        let second = Box<ActionError<SignUpError>?>(nil)
        viewModel.submit.apply().startWithFailed { second.value = $0 }
        #expect(second.value == .disabled)
        scheduler.run()
        #expect(created.value == ["ada@example.com"])
    }

    @Test func resendingACodeCountsDownOnTheSchedulerAndIsDisabledMeanwhile() {
        let viewModel = makeViewModel(resendInterval: 3)
        viewModel.email.value = "ada@example.com"
        let ticks = Box<[Int]>([])
        viewModel.resendCountdown.signal.observeValues { value in ticks.modify { $0.append(value) } }

        viewModel.resendCode.apply().start()
        #expect(codes.value == ["ada@example.com"])
        #expect(viewModel.resendCountdown.value == 3)
        #expect(!viewModel.resendCode.isEnabled.value)

        scheduler.advance(by: .seconds(1))
        #expect(viewModel.resendCountdown.value == 2)
        scheduler.advance(by: .seconds(2))
        #expect(ticks.value == [3, 2, 1, 0])
        #expect(viewModel.resendCode.isEnabled.value)

        viewModel.resendCode.apply().start()
        #expect(codes.value == ["ada@example.com", "ada@example.com"])
    }
}

/// A box that closures can share.
final class Box<T>: @unchecked Sendable {  // Tests only: the view model runs on the test's thread.
    var value: T
    init(_ value: T) { self.value = value }
    func modify(_ body: (inout T) -> Void) { body(&value) }
}
