"""Test support shared by the tests and bench/: scripted servers, clients, fakes, factories (nothing
outside the tests and benches imports it, and it imports no test module)."""
