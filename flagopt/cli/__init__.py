"""``python -m flagopt <verb>``: one module per verb, each a ``_add_<verb>`` / ``_cmd_<verb>`` pair.

Example:
    >>> from flagopt.cli import main
    >>> main(["validate", "--space", "search_spaces/demo.yaml"])  # doctest: +SKIP
    0
"""

from __future__ import annotations

import argparse
import errno
import os
import sys
from collections.abc import Sequence

from flagopt import __version__
from flagopt.cli import _ab, _dashboard, _evidence, _export, _leaderboard, _report, _run, _status, _validate
from flagopt.errors import EXIT_FAILURE, EXIT_INTERRUPTED, FlagoptError

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
        code = int(args.handler(args) or 0)
        sys.stdout.flush()  # here, not at exit: a full disk or a closed pipe is then said once, below
        return code
    except FlagoptError as exc:
        print(f"flagopt: error: {exc.message}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        if not args.own_signals:
            raise  # the caller's Ctrl-C (pytest, a notebook): theirs to handle
        print("flagopt: cancelled by you (Ctrl-C)", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # `flagopt leaderboard | head -1`: the reader has what it wanted; stop quietly, as a program killed by
        # SIGPIPE would (exit 141), and keep the interpreter from writing to the closed pipe again at exit
        _silence_stdout()
        return EXIT_SIGPIPE
    except OSError as exc:
        if exc.errno not in WRITE_FAULTS:
            raise
        # stdout on /dev/full, a full disk or quota under the trial folders: one line, not a traceback
        _silence_stdout()
        where = f" ({exc.filename})" if exc.filename else " (standard output or a file flagopt writes)"
        print(f"flagopt: error: cannot write{where}: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_FAILURE


#: 128 + SIGPIPE: what a shell reports for a program that wrote into a closed pipe
EXIT_SIGPIPE = 141
#: the errors of a write that no retry mends: a full disk or quota, a file too large, an I/O error
WRITE_FAULTS = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO, errno.EROFS}


def _silence_stdout() -> None:
    """Point stdout at /dev/null, so the interpreter's flush at exit raises nothing more."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass  # stdout is not a file (a test's capture): nothing is flushed at exit
