"""Helpers and fakes the tests share (no test module imports another)."""
