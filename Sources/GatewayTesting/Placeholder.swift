// Placeholder: filled in by the GatewayTesting work.
