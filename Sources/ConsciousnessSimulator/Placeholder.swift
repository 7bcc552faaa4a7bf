// Placeholder: filled in by the ConsciousnessSimulator work.
