/// The one executor the gateway's core and its extensions run on. Events are dispatched to the
/// extensions synchronously on it (no hop per event), as zigbee2mqtt's controller calls its
/// extensions in turn; vendor calls and disk writes run elsewhere and report back here.
@globalActor
public actor GatewayActor {
    public static let shared = GatewayActor()
}
