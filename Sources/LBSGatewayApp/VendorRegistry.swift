import VendorAwair
import VendorConsciousness
import VendorDemo
import VendorEmporia
import VendorEnphase
import VendorFlume
import VendorGreenButton
import VendorHomeKit
import VendorKit
import VendorNeurio
import VendorPowerwall
import VendorMatter
import VendorSense
import VendorSolarEdge

/// Every vendor type the gateway can run. A vendor is its folder (a target named `Vendor<Name>`, listed in
/// `Package.swift`'s `vendors`) and one line here; nothing else in the gateway knows it (the core sees them
/// through `GatewayApp.vendors`, a `VendorCatalog`).
/// See docs/adding-a-vendor.md.
public enum VendorRegistry {
    public static let factories: [any VendorFactory.Type] = [
        DemoVendorFactory.self,
        ConsciousnessVendorFactory.self,
        PowerwallVendorFactory.self,
        GreenButtonVendorFactory.self,
        SolarEdgeVendorFactory.self,
        EnphaseVendorFactory.self,
        AwairCloudVendorFactory.self,
        AwairLocalVendorFactory.self,
        FlumeVendorFactory.self,
        NeurioVendorFactory.self,
        EmporiaVendorFactory.self,
        SenseVendorFactory.self,
        MatterVendorFactory.self,
        HomeKitVendorFactory.self,
    ]
}
