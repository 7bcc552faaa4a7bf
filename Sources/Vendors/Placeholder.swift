// Placeholder: filled in by the Vendors work.
