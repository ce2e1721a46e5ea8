// start(on:): each run started on a scheduler.

extension SignalProducer {
    /// Starts each run on `scheduler` (its start handler runs there).
    public func start(on scheduler: any Scheduler) -> SignalProducer<Value, Error> {
        SignalProducer { observer, lifetime in
            lifetime._attachDisposing(
                scheduler.schedule {
                    guard !lifetime.hasEnded else { return }
                    self._run(observer, lifetime)
                })
        }
    }
}
