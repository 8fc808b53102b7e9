"""The one exception type a stage raises for bad input or configuration."""


class StageError(Exception):
    """A user-facing failure: the CLI prints the message and exits non-zero, no traceback."""
