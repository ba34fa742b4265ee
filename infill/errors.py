"""The one error type that means "the request or the input is bad" (CLI exit code 2)."""


class InputError(Exception):
    """Bad input: unreadable file, invalid span, etc. Nothing was changed."""
