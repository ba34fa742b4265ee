"""Error types that cross module boundaries (the CLI maps each to an exit code)."""


class InputError(Exception):
    """Bad input: unreadable file, invalid span, etc. Nothing was changed (exit code 2)."""


class ModelError(Exception):
    """The model could not be loaded or run (exit code 3)."""


class Cancelled(Exception):
    """The caller asked the sampler to stop (e.g. an editor cancelled the request)."""


class TimedOut(Exception):
    """The request's deadline passed with nothing to return (exit code 124, as timeout(1))."""
