"""The contracts between stages: every artifact path, the items, predictions and scores
tables, metrics files, provenance, numbers as stored."""
