"""``predict.backend: anthropic``: Claude through the official ``anthropic`` SDK (issue 22)."""
