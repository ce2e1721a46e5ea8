// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "ReactiveLoop",
    products: [
        .library(name: "ReactiveLoop", targets: ["ReactiveLoop"]),
        .library(name: "ReactiveLoopCore", targets: ["ReactiveLoopCore"]),
        .library(name: "ReactiveLoopUV", targets: ["ReactiveLoopUV"]),
        .executable(name: "reactiveloop-example", targets: ["ReactiveLoopExample"]),
        .executable(name: "loopd", targets: ["loopd"]),
        .executable(name: "loopd-bench", targets: ["loopd-bench"]),
        .executable(name: "signup-demo", targets: ["SignUpDemo"]),
    ],
    dependencies: [
        // loopd-bench's command line (loopd reads its own: see CommandLineOptions).
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.6.0"),
    ],
    targets: [
        // The core: signals, producers, properties, actions, schedulers. It needs only
        // FoundationEssentials, so that a daemon built on it does not load the whole of Foundation.
        .target(
            name: "ReactiveLoopCore",
            swiftSettings: [.enableExperimentalFeature("StrictConcurrency")]
        ),
        // ReactiveSwift's module as ported code imports it: the core, re-exported, and the
        // extensions of Foundation's NotificationCenter and URLSession.
        .target(
            name: "ReactiveLoop", dependencies: ["ReactiveLoopCore"],
            swiftSettings: [.enableExperimentalFeature("StrictConcurrency")]
        ),
        // The system's libuv (Debian: libuv1-dev), found by pkg-config.
        .systemLibrary(name: "CLibUV", pkgConfig: "libuv", providers: [.apt(["libuv1-dev"])]),
        .target(name: "ReactiveLoopUV", dependencies: ["ReactiveLoopCore", "CLibUV"]),
        .executableTarget(name: "ReactiveLoopExample", dependencies: ["ReactiveLoop"]),
        // What the test targets share: helpers and the scheduler conformance checks.
        .target(
            name: "ReactiveLoopTestSupport", dependencies: ["ReactiveLoop"], path: "Tests/ReactiveLoopTestSupport"),
        .testTarget(
            name: "ReactiveLoopTests", dependencies: ["ReactiveLoop", "ReactiveLoopCore", "ReactiveLoopTestSupport"]),
        // The MVVM example: a headless sign-up view model, a demo that drives it, and its tests.
        .target(name: "SignUpViewModel", dependencies: ["ReactiveLoop"], path: "Examples/SignUp/ViewModel"),
        .executableTarget(
            name: "SignUpDemo", dependencies: ["SignUpViewModel", "ReactiveLoop"], path: "Examples/SignUp/Demo"),
        .testTarget(
            name: "SignUpViewModelTests", dependencies: ["SignUpViewModel", "ReactiveLoop"],
            path: "Examples/SignUp/Tests"),
        // A program the runtime tests start as a child process, for what needs a fresh process
        // whose main thread runs an event loop (the test runner's main thread runs Dispatch).
        .executableTarget(
            name: "UVTestHost", dependencies: ["ReactiveLoop", "ReactiveLoopUV"], path: "Tests/UVTestHost"),
        // loopd: a StatsD daemon. LoopdCore is its parser, series table and output formats, on the
        // standard library alone, so that scripts/fuzz-parser compiles all of it without the
        // package; loopd is the flags and the wiring on the loop.
        .target(name: "LoopdCore"),
        // glibc's <malloc.h> and <sys/auxv.h>, for the allocator setting loopd makes at start.
        .systemLibrary(name: "CGlibcMalloc"),
        .executableTarget(
            name: "loopd",
            dependencies: [
                "LoopdCore", "ReactiveLoopCore", "ReactiveLoopUV", "CGlibcMalloc",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // The load generator and side-by-side runner for loopd and collectd (docs/performance.md).
        .target(name: "CLoadGen"),
        .executableTarget(
            name: "loopd-bench",
            dependencies: ["CLoadGen", "LoopdCore", .product(name: "ArgumentParser", package: "swift-argument-parser")]
        ),
        .testTarget(
            name: "LoopdTests", dependencies: ["LoopdCore", "loopd", "CGlibcMalloc", "ReactiveLoopTestSupport"]),
        .testTarget(
            name: "ReactiveLoopUVTests",
            dependencies: ["ReactiveLoop", "ReactiveLoopUV", "UVTestHost", "ReactiveLoopTestSupport"]),
    ],
    swiftLanguageModes: [.v6]
)
