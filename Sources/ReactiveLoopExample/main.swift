// A small tour of ReactiveLoop: a pipe, a property, a producer and an action.
import ReactiveLoop

let (temperatures, sensor) = Signal<Double, Never>.pipe()
let alarm = MutableProperty(false)
alarm <~ temperatures.map { $0 > 30 }.skipRepeats()
alarm.producer.skipRepeats().startWithValues { print("alarm:", $0) }

for reading in [21.5, 24.0, 31.2, 33.0, 28.9] {
    sensor.send(value: reading)
}
sensor.sendCompleted()

let double = Action<Int, Int, Never> { input in SignalProducer(value: input * 2) }
double.values.observeValues { print("doubled:", $0) }
double.apply(21).start()

SignalProducer<Int, Never>(1...5)
    .filter { $0 % 2 == 1 }
    .map { $0 * $0 }
    .startWithValues { print("odd square:", $0) }
