"""The one error type a user sees: it names the file, the key and the reason."""

from __future__ import annotations

from dataclasses import dataclass

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
#: Ctrl-C, as shells report it (128 + SIGINT); SIGTERM gives 143 (128 + 15).
EXIT_INTERRUPTED = 130


class FlagoptError(Exception):
    """An error the CLI turns into one stderr line and a non-zero exit.

    Example:
        >>> str(FlagoptError("pp.yaml", "params.x.low", "must be > 0 when log: true"))
        'pp.yaml: params.x.low: must be > 0 when log: true'
    """

    exit_code = EXIT_USAGE

    def __init__(self, source: str, key: str | None, reason: str) -> None:
        self.source = source
        self.key = key
        self.reason = reason
        super().__init__(self.message)

    @property
    def message(self) -> str:
        parts = [p for p in (self.source, self.key) if p]
        return ": ".join([*parts, self.reason])


class SpaceError(FlagoptError):
    """The search-space file is invalid."""


class StudyError(FlagoptError):
    """The study cannot be run or read as asked (missing study, locked, nodelist changed...)."""

    exit_code = EXIT_FAILURE


@dataclass(frozen=True)
class StudyStopped:
    """Why a study stopped; not an error, a verdict."""

    reason: str
    detail: str = ""
