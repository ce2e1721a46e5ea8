// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "ReactiveLoop",
    products: [
        .library(name: "ReactiveLoop", targets: ["ReactiveLoop"]),
        .executable(name: "reactiveloop-example", targets: ["ReactiveLoopExample"]),
    ],
    targets: [
        .target(
            name: "ReactiveLoop",
            swiftSettings: [.enableExperimentalFeature("StrictConcurrency")]
        ),
        .executableTarget(name: "ReactiveLoopExample", dependencies: ["ReactiveLoop"]),
        .testTarget(name: "ReactiveLoopTests", dependencies: ["ReactiveLoop"]),
    ],
    swiftLanguageModes: [.v6]
)
