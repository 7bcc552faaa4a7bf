// libFuzzer harness for the config loader: `ConfigLoader.parse(yaml:environment:baseDirectory:)` over any
// UTF-8 text (`load(path:)` refuses other bytes before parsing). It must never crash or hang; a refused file
// carries problems that each name a key path, say what is wrong and how to fix it; an accepted one holds
// what the loader promises. Seeds: Fuzz/corpus/config. Run by deploy/fuzz.sh; see FuzzDriver for replay.

import FuzzDriver
import GatewayCore
import LBSGatewayApp
import VendorKit

@main enum ConfigFuzz {
    static func main() { fuzzMain(fuzzOne) }
}

/// No file a config names can be read from here, so the fuzzer exercises the checks, not the disk.
let baseDirectory = "/nonexistent/lbs-gateway-fuzz"

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let bytes = fuzzBytes(data, size)
    guard let text = String(validating: bytes, as: UTF8.self) else { return 0 }
    switch ConfigLoader.parse(yaml: text, environment: [:], baseDirectory: baseDirectory) {
    case .success(let config):
        if config.vendors.isEmpty { violated("accepted a config without vendors", bytes) }
        let ids = config.vendors.map(\.id)
        if Set(ids).count != ids.count { violated("accepted a vendor id twice: \(ids)", bytes) }
        for vendor in config.vendors where !VendorCatalog.all.types.contains(vendor.type) {
            violated("accepted the unknown vendor type \(vendor.type)", bytes)
        }
        let url = config.mqtt.url.lowercased()
        if !url.hasPrefix("mqtt://"), !url.hasPrefix("mqtts://") { violated("accepted the broker URL \(config.mqtt.url)", bytes) }
    case .failure(let failure):
        if failure.problems.isEmpty { violated("refused without a problem", bytes) }
        for problem in failure.problems where problem.path.isEmpty || problem.message.isEmpty || problem.fix.isEmpty {
            violated("a problem without path, message or fix: \(problem)", bytes)
        }
        if failure.description.isEmpty { violated("an empty failure description", bytes) }
    }
    return 0
}
