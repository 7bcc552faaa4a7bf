#if canImport(Glibc)
import Glibc
#endif

// lbs-icu-data INPUT OUTPUT: writes the ICU common data package INPUT (the bytes of the toolchain's `icudt<N>_dat`)
// to OUTPUT with only the items the gateway uses (ICUDataSelection). deploy/build-release.sh links the result into
// the static build in place of the full package. Checks its output by reading it back; exits 1 on any failure.

func fail(_ message: String) -> Never {
    let line = Array("lbs-icu-data: \(message)\n".utf8)
    _ = line.withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
    exit(1)
}

func readFile(_ path: String) -> [UInt8] {
    guard let file = fopen(path, "rb") else { fail("cannot open \(path): \(String(cString: strerror(errno)))") }
    defer { fclose(file) }
    var bytes: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 1 << 20)
    while true {
        let count = fread(&chunk, 1, chunk.count, file)
        bytes += chunk[0..<count]
        if count < chunk.count { break }
    }
    guard ferror(file) == 0 else { fail("cannot read \(path)") }
    return bytes
}

func writeFile(_ path: String, _ bytes: [UInt8]) {
    guard let file = fopen(path, "wb") else { fail("cannot create \(path): \(String(cString: strerror(errno)))") }
    let written = bytes.withUnsafeBytes { fwrite($0.baseAddress, 1, $0.count, file) }
    guard written == bytes.count, fclose(file) == 0 else { fail("cannot write \(path)") }
}

let arguments = CommandLine.arguments
guard arguments.count == 3 else { fail("usage: lbs-icu-data INPUT.dat OUTPUT.dat") }
do {
    let package = try ICUDataPackage(bytes: readFile(arguments[1]))
    let kept = package.filtered(ICUDataSelection.keeps)
    let output = kept.serialized()
    let full = package.items.reduce(0) { $0 + $1.bytes.count }
    guard try ICUDataPackage(bytes: output).holdsTheItems(of: kept) else { fail("the written package does not read back the same") }
    writeFile(arguments[2], output)
    print("lbs-icu-data: kept \(kept.items.count) of \(package.items.count) items, \(output.count / 1024) KiB of \(full / 1024) KiB")
} catch {
    fail("\(arguments[1]): \(error)")
}
