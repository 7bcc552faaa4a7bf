// Placeholder: filled in by the Gateway work.
