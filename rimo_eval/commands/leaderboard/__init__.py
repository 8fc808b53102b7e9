"""``rimo-eval leaderboard``: many runs in one table, with rank ranges and paired tests."""
