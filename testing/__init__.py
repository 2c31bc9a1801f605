"""The testing kit shared by tests and benches (nothing outside tests and benches imports it)."""
