import GatewayModel

/// The errors whose advice names MQTT tools: the model's taxonomy knows no transport; the core, which speaks
/// MQTT, says how to fix them with one.
extension GatewayError {
    package static func retainedCommand(_ topic: String) -> GatewayError {
        GatewayError(
            .retainedCommand,
            message: "Ignored a retained command on '\(clip(topic))': retained commands may be stale.",
            suggestion: "Publish commands with retain=false, and clear the retained message with: mosquitto_pub -r -n -t '\(clip(topic))'."
        )
    }
}
