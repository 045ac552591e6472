"""The one exception the collectors raise for anything a user can fix."""

from __future__ import annotations


class CollectError(Exception):
    """A collection that cannot start or did not finish; ``str(err)`` is one line, ``detail`` may add more."""

    def __init__(self, message: str, *, detail: str = "", exit_code: int = 2) -> None:
        super().__init__(message)
        self.detail = detail
        self.exit_code = exit_code
