"""rimo-eval audit: recompute every metric and check each hash chain."""
