"""Tools that are not DVC stages."""
