"""Options shared by several verbs."""

from __future__ import annotations

import argparse

from rich.console import Console


def add_storage(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--storage", metavar="URL", default=None,
                        help="Optuna storage URL (default: $FLAGOPT_STORAGE or sqlite:///studies/flagopt.db); "
                             "journal:///path/to/file.log for a journal file on NFS")


def console() -> Console:
    return Console(highlight=False, soft_wrap=False, width=None)
