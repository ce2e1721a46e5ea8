// observe(on:): every event delivered on a scheduler.

extension Signal {
    /// Delivers every event on `scheduler`, in order.
    public func observe(on scheduler: any Scheduler) -> Signal<Value, Error> {
        _timed { sink, _ in Observer { event in scheduler.schedule { sink.send(event) } } }
    }
}

extension SignalProducer {
    /// Delivers every event of each run on `scheduler`, in order.
    public func observe(on scheduler: any Scheduler) -> SignalProducer<Value, Error> {
        _timed(hopping: scheduler) { sink, _ in Signal.Observer { event in scheduler.schedule { sink.send(event) } } }
    }
}
