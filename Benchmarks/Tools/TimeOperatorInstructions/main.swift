// Runs one time operator's hot path N times, with deadlines on the scheduler's clock or through
// dates, for counting instructions per operation under callgrind (scripts/time-operator-
// instructions). Instruction counts do not depend on the machine's load, unlike time, which on a
// shared machine cannot resolve the few dozen nanoseconds at stake.
//
//   TimeOperatorInstructions clock|dates debounce|delay|timeout N
//
// - debounce, delay: N values into `debounce(3600)` / `delay(3600)` on a QueueScheduler (one
//   clock read per value; the timer is armed once).
// - timeout: N runs of `timeout(after: 3600)` on a QueueScheduler, each started and disposed
//   (one timer armed and disposed per run, behind an earlier pending timer).

import Dispatch
import Foundation
@_spi(Testing) import ReactiveLoop

struct TimedOut: Error {}

let arguments = CommandLine.arguments
guard arguments.count == 4, let count = Int(arguments[3]), ["clock", "dates"].contains(arguments[1]) else {
    FileHandle.standardError.write(Data("usage: TimeOperatorInstructions clock|dates debounce|delay|timeout N\n".utf8))
    exit(2)
}
_TimeOperatorClock.current = arguments[1] == "dates" ? .dates : .schedulerClock
let scheduler = QueueScheduler(name: "TimeOperatorInstructions")
var sum = 0
switch arguments[2] {
case "debounce", "delay":
    let (signal, input) = Signal<Int, Never>.pipe()
    let output = arguments[2] == "delay" ? signal.delay(3600, on: scheduler) : signal.debounce(3600, on: scheduler)
    output.observeValues { sum &+= $0 }
    for value in 0..<count { input.send(value: value) }
case "timeout":
    let earlier = scheduler.schedule(after: Date(timeIntervalSinceNow: 1_800)) {}
    let producer = SignalProducer<Int, TimedOut>.never.timeout(after: 3600, raising: TimedOut(), on: scheduler)
    for _ in 0..<count { producer.start().dispose() }
    earlier?.dispose()
default:
    FileHandle.standardError.write(Data("unknown operator \(arguments[2])\n".utf8))
    exit(2)
}
print(sum)
