// Placeholder: filled in by the Cache work.
