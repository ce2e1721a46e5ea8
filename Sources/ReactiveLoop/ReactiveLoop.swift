// ReactiveLoop, as code ported from ReactiveSwift imports it: the core (signals, producers,
// properties, actions, schedulers) and the extensions of Foundation's types. A program that
// does not use those extensions can import ReactiveLoopCore alone, which needs only
// FoundationEssentials, and so load less of Foundation.
@_exported import ReactiveLoopCore
