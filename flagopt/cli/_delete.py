"""``flagopt delete STUDY``: remove a study from its storage and its folder (trial folders, logs, jobs) together."""

from __future__ import annotations

import argparse
import sys

from flagopt.cli._common import add_storage, examples
from flagopt.errors import EXIT_FAILURE, FlagoptError
from flagopt.study import delete_study, describe_deletion, shown_url, storage_url


def add(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("delete", help="delete a study and its studies/<name>/ folder (asks first unless --yes)",
                       **examples("python -m flagopt delete demo",
                                  "python -m flagopt delete demo --yes --storage sqlite:///elsewhere/flagopt.db"))
    p.add_argument("study")
    add_storage(p)
    p.add_argument("-y", "--yes", action="store_true", help="do not ask for confirmation")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    trials, folder = describe_deletion(args.storage, args.study)  # no such study: one error, before any question
    what = (f"study {args.study!r} ({trials} trial{'s' if trials != 1 else ''}) in "
            f"{shown_url(storage_url(args.storage))} and its folder {folder}")
    if not args.yes:
        if not sys.stdin.isatty():
            raise FlagoptError("delete", "--yes", f"would delete {what}; nothing to ask on a non-interactive "
                                                  "input: pass --yes to delete without asking")
        answer = input(f"delete {what}? [y/N] ").strip().lower()
        if answer not in ("y", "yes"):
            print("nothing deleted", file=sys.stderr)
            return EXIT_FAILURE
    done = delete_study(args.storage, args.study)
    print(f"deleted {what}" + ("" if done.folder_existed else " (the folder did not exist)"), file=sys.stderr)
    return 0
