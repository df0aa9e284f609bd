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
