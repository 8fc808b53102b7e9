"""``rimo-eval plan``: the power planner (command), its arguments (arguments)."""
