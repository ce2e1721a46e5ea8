import ReactiveLoopCore
import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

extension NotificationCenter: ReactiveExtensionsProvider {}

extension Reactive where Base: NotificationCenter {
    /// A signal of the notifications named `name` (any name if `nil`) posted by `object` (any
    /// object if `nil`), delivered on the posting thread.
    ///
    /// The center observer is removed when the signal ends: when it has no observers left and
    /// nothing else refers to it.
    public func notifications(forName name: Notification.Name?, object: AnyObject? = nil) -> Signal<
        Notification, Never
    > {
        Signal { [base] observer, lifetime in
            let token = base.addObserver(forName: name, object: object, queue: nil) { notification in
                observer.send(value: notification)
            }
            lifetime.observeEnded { base.removeObserver(token) }
        }
    }
}

extension URLSession: ReactiveExtensionsProvider {}

extension Reactive where Base: URLSession {
    /// A producer that loads `request` with a data task on each start, sends the data and the
    /// response, then completes; a transport error fails the run. Disposing the run cancels
    /// the task.
    public func data(with request: URLRequest) -> SignalProducer<(Data, URLResponse), any Error> {
        SignalProducer { [base] observer, lifetime in
            let task = base.dataTask(with: request) { data, response, error in
                if let data, let response {
                    observer.send(value: (data, response))
                    observer.sendCompleted()
                } else {
                    observer.send(error: error ?? URLError(.badServerResponse))
                }
            }
            lifetime.observeEnded { task.cancel() }
            task.resume()
        }
    }
}
