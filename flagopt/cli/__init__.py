"""``python -m flagopt <verb>``: one module per verb, each a ``_add_<verb>`` / ``_cmd_<verb>`` pair.

Example:
    >>> from flagopt.cli import main
    >>> main(["validate", "--space", "search_spaces/demo.yaml"])  # doctest: +SKIP
    0
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from flagopt import __version__
from flagopt.cli import _ab, _dashboard, _evidence, _export, _leaderboard, _report, _run, _status, _validate
from flagopt.errors import EXIT_INTERRUPTED, FlagoptError

from flagopt.cli import _compare, _delete, _studies  # noqa: I001 (the study verbs: listing, deleting, comparing)

VERBS = [_run, _validate, _leaderboard, _status, _report, _export, _ab, _dashboard, _evidence]

VERBS += [_studies, _delete, _compare]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="flagopt", description=(
        "Find the XLA flags, NCCL variables and workload settings that make one JAX training job fastest."))
    parser.add_argument("--version", action="version", version=f"flagopt {__version__}")
    sub = parser.add_subparsers(dest="verb", required=True, metavar="VERB")
    for verb in VERBS:
        verb.add(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one verb; returns the exit status.

    ``argv=None`` reads the process's command line: this is the program (``python -m flagopt``, the ``flagopt``
    script), so ``run`` owns SIGINT/SIGTERM and stops cleanly on them. Given ``argv`` (a test, another program),
    Ctrl-C interrupts the caller as usual, after ``run`` has cancelled its jobs.
    """
    import warnings

    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    parser = build_parser()
    args = parser.parse_args(argv)
    args.own_signals = argv is None
    try:
        return int(args.handler(args) or 0)
    except FlagoptError as exc:
        print(f"flagopt: error: {exc.message}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        if not args.own_signals:
            raise  # the caller's Ctrl-C (pytest, a notebook): theirs to handle
        print("flagopt: cancelled by you (Ctrl-C)", file=sys.stderr)
        return EXIT_INTERRUPTED
