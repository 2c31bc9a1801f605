"""The shared kit: errors, the egress guard, the provider registry, fields, crypto, validation, the API
base view, limits, metrics and traces. It imports no domain app (import-linter checks it: `make lint`)."""
