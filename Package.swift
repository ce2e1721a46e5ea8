// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "ReactiveLoop",
    products: [
        .library(name: "ReactiveLoop", targets: ["ReactiveLoop"]),
        .library(name: "ReactiveLoopUV", targets: ["ReactiveLoopUV"]),
        .executable(name: "reactiveloop-example", targets: ["ReactiveLoopExample"]),
    ],
    targets: [
        .target(
            name: "ReactiveLoop",
            swiftSettings: [.enableExperimentalFeature("StrictConcurrency")]
        ),
        // The system's libuv (Debian: libuv1-dev), found by pkg-config.
        .systemLibrary(name: "CLibUV", pkgConfig: "libuv", providers: [.apt(["libuv1-dev"])]),
        .target(name: "ReactiveLoopUV", dependencies: ["ReactiveLoop", "CLibUV"]),
        .executableTarget(name: "ReactiveLoopExample", dependencies: ["ReactiveLoop"]),
        .testTarget(name: "ReactiveLoopTests", dependencies: ["ReactiveLoop"]),
        // A program the runtime tests start as a child process, for what needs a fresh process
        // whose main thread runs an event loop (the test runner's main thread runs Dispatch).
        .executableTarget(
            name: "UVTestHost", dependencies: ["ReactiveLoop", "ReactiveLoopUV"], path: "Tests/UVTestHost"),
        .testTarget(name: "ReactiveLoopUVTests", dependencies: ["ReactiveLoop", "ReactiveLoopUV", "UVTestHost"]),
    ],
    swiftLanguageModes: [.v6]
)
