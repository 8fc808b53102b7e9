"""The exception types a stage raises: the CLI prints them and exits non-zero, no traceback."""


class StageError(Exception):
    """A user-facing failure: the CLI prints the message and exits non-zero, no traceback."""


class ConfigError(StageError):
    """params.yaml or a command-line option is wrong: a key, a type, a value."""


class DataError(StageError):
    """An input file is missing, unreadable or breaks a rule of the benchmark."""


class IntegrityError(StageError):
    """An artifact disagrees with what produced it: a hash, a lock entry, a mixed run."""
