// Placeholder: filled in by the MQTT work.
