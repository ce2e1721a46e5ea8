// swift-tools-version:6.1
import Foundation
import PackageDescription

// The root package is a path dependency, identified by its folder's name, which differs between
// checkouts (a CI clone is not named like a developer's folder): compute it from this file.
let rootPackage = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .lastPathComponent

let package = Package(
    name: "ReactiveLoopBenchmarks",
    platforms: [.macOS(.v13)],
    dependencies: [
        .package(path: ".."),
        .package(url: "https://github.com/ordo-one/benchmark.git", from: "1.38.1", traits: ["MallocInterposer"]),
        .package(url: "https://github.com/OpenCombine/OpenCombine.git", from: "0.14.0"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
    ],
    targets: [
        // The system's libuv, for raw libuv timers beside LoopScheduler.
        .systemLibrary(name: "CLibUVRaw", path: "Benchmarks/CLibUVRaw", pkgConfig: "libuv"),
        .executableTarget(
            name: "ReactiveLoopBenchmarks",
            dependencies: [
                .product(name: "ReactiveLoop", package: rootPackage),
                .product(name: "ReactiveLoopUV", package: rootPackage),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                "CLibUVRaw",
                .product(name: "Benchmark", package: "benchmark"),
                .product(name: "OpenCombine", package: "OpenCombine"),
            ],
            path: "Benchmarks/ReactiveLoopBenchmarks",
            swiftSettings: [.swiftLanguageMode(.v5)],
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
        // Time operators' hot paths, for instruction counts under callgrind
        // (scripts/time-operator-instructions). Not under Benchmarks/: package-benchmark takes
        // every executable there for a benchmark suite.
        .executableTarget(
            name: "TimeOperatorInstructions",
            dependencies: [.product(name: "ReactiveLoop", package: rootPackage)],
            path: "Tools/TimeOperatorInstructions"
        ),
    ]
)
