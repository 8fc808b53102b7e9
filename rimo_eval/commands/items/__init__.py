"""``rimo-eval items``: an item audit over many runs (solve rates, IRT, suspect golds)."""
