"""The score stage: grading, metrics, statistics."""
