"""Errors every floor above may catch without importing what raises them."""


class SessionConfigError(Exception):
    """Configuration that cannot work: a one-line message; the command exits 2."""
