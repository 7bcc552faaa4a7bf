// Placeholder: filled in by the Resilience work.
