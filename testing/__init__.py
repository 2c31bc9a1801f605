"""Test support shared by the tests and bench/: scripted servers, clients, fakes, factories."""
