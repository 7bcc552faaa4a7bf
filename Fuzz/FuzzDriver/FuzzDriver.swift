// The entry of the SwiftPM fuzz targets (ConfigFuzz, VendorFuzz). Built by deploy/fuzz.sh with LBS_FUZZ=1, a
// target hands its one-input function to libFuzzer's driver; in a normal build the same function runs the
// files given as arguments (directories: every file in them), so a finding can be replayed without the fuzzer.

import Foundation

/// libFuzzer's `LLVMFuzzerTestOneInput`: one input, 0 when it was handled. A broken invariant is a fatalError.
public typealias FuzzTarget = @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt

/// The input as bytes (libFuzzer may pass a null pointer for the empty input).
public func fuzzBytes(_ data: UnsafePointer<UInt8>?, _ size: Int) -> [UInt8] {
    guard let data, size > 0 else { return [] }
    return Array(UnsafeBufferPointer(start: data, count: size))
}

/// Fails the run with the input shown, which libFuzzer reports as a crash and saves.
public func violated(_ what: String, _ bytes: [UInt8]) -> Never {
    fatalError("invariant broken: \(what); input \(String(decoding: bytes.prefix(200), as: UTF8.self).debugDescription)")
}

#if LIBFUZZER
@_silgen_name("LLVMFuzzerRunDriver")
private func runDriver(
    _ argc: UnsafeMutablePointer<CInt>, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>>,
    _ target: FuzzTarget
) -> CInt
#endif

/// Runs `target` under libFuzzer (fuzz build) or over the inputs named on the command line (normal build).
public func fuzzMain(_ target: FuzzTarget) -> Never {
    #if LIBFUZZER
    // SwiftPM links the target's own main; libFuzzer's driver takes the arguments from there.
    var argc = CommandLine.argc
    var argv = CommandLine.unsafeArgv
    exit(runDriver(&argc, &argv, target))
    #else
    let paths = CommandLine.arguments.dropFirst()
    if paths.isEmpty {
        FileHandle.standardError.write(Data("usage: \(CommandLine.arguments.first ?? "fuzz") <input file or directory>…\n".utf8))
        exit(2)
    }
    var count = 0
    for path in paths {
        for file in inputFiles(path) {
            guard let data = FileManager.default.contents(atPath: file) else {
                FileHandle.standardError.write(Data("cannot read \(file)\n".utf8))
                exit(1)
            }
            _ = data.withUnsafeBytes { target($0.bindMemory(to: UInt8.self).baseAddress, $0.count) }
            count += 1
        }
    }
    print("replayed \(count) inputs: no crash, no broken invariant")
    exit(0)
    #endif
}

/// A file, or every regular file below a directory (sorted, so runs are repeatable).
private func inputFiles(_ path: String) -> [String] {
    var isDirectory: ObjCBool = false
    guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), isDirectory.boolValue else { return [path] }
    let names = (FileManager.default.enumerator(atPath: path)?.allObjects as? [String]) ?? []
    return names.sorted().map { path + "/" + $0 }.filter { file in
        var isDirectory: ObjCBool = false
        return FileManager.default.fileExists(atPath: file, isDirectory: &isDirectory) && !isDirectory.boolValue
    }
}
