"""What every stage shares: artifact paths, config, hashing, atomic writes, items, predictions,
errors, provenance."""
