// Drives the sign-up view model the way a screen would, without a screen: it types into the
// fields, presses the buttons, and prints what a view would show. Real time, on a
// QueueScheduler; the service answers after 200 ms.
import Dispatch
import ReactiveLoop
import SignUpViewModel

let scheduler = QueueScheduler(name: "signup-demo")
let service = SignUpService(
    createAccount: { email, _ in
        SignalProducer<Account, SignUpError> { () async throws(SignUpError) -> Account in
            try? await Task.sleep(nanoseconds: 200_000_000)
            if email.hasPrefix("taken") { throw .emailTaken }
            return Account(email: email)
        }
    },
    sendCode: { email in SignalProducer(value: ()).on(completed: { print("  (code sent to \(email))") }) })
let viewModel = SignUpViewModel(service: service, scheduler: scheduler, resendInterval: 3)

viewModel.emailError.producer.startWithValues { print("email error:    \($0 ?? "none")") }
viewModel.passwordError.producer.startWithValues { print("password error: \($0 ?? "none")") }
viewModel.submit.isEnabled.producer.startWithValues { print("submit button:  \($0 ? "enabled" : "disabled")") }
viewModel.status.signal.observeValues { print("status:         \($0)") }
viewModel.resendCountdown.signal.observeValues { print("resend in:      \($0) s") }

/// Applies `action` and waits for the run to end.
func press<Output, Failure>(_ action: Action<Void, Output, Failure>) {
    _ = action.apply().wait()
}

print("-- typing")
viewModel.email.value = "ada"
viewModel.email.value = "taken@example.com"
viewModel.password.value = "correct horse"
viewModel.passwordConfirmation.value = "correct horse"
print("-- submit")
press(viewModel.submit)
viewModel.email.value = "ada@example.com"
print("-- submit again")
press(viewModel.submit)
print("-- resend code")
press(viewModel.resendCode)
print("-- done")
