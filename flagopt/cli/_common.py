"""Options shared by several verbs."""

from __future__ import annotations

import argparse

from rich.console import Console


def add_storage(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--storage", metavar="URL", default=None,
                        help="Optuna storage URL (default: $FLAGOPT_STORAGE or sqlite:///studies/flagopt.db); "
                             "journal:///path/to/file.log for a journal file on NFS; "
                             "mysql+pymysql://user:password@host:3306/db for a team's database server "
                             "(trial folders then go under $FLAGOPT_ARTIFACTS, else ./studies; docs/storage.md)")


class _Console(Console):
    def on_broken_pipe(self) -> None:
        # rich would exit 1 by itself; flagopt.cli.main says every closed pipe the same way (quiet, exit 141)
        raise BrokenPipeError


def console() -> Console:
    probe = Console()
    # Logs and CI are not terminals: rich would wrap tables at 80 columns there.
    return _Console(highlight=False, width=None if probe.is_terminal else 160)


def examples(*lines: str) -> dict[str, object]:
    """``add_parser`` keywords that end a verb's ``--help`` with runnable examples (kept as written, not re-wrapped).

    Example:
        >>> examples("python -m flagopt studies")["epilog"]
        'example:\\n  python -m flagopt studies'
    """
    head = "example:" if len(lines) == 1 else "examples:"
    return {"epilog": "\n  ".join([head, *lines]), "formatter_class": argparse.RawDescriptionHelpFormatter}


def storage_hint(storage: str | None) -> str:
    """`` --storage URL`` to repeat in a printed next command, empty for the default storage."""
    if not storage:
        return ""
    import shlex

    from flagopt.study import shown_url
    return f" --storage {shlex.quote(shown_url(storage))}"
