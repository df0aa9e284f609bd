"""``flagopt export STUDY``: the confirmed winner (or a named trial) as env.sh, JSON or an XLA flag string.

Without a confirmed winner it writes nothing and exits 1: keep the deployed job.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from flagopt.cli._common import add_storage, examples
from flagopt.errors import FlagoptError
from flagopt.export import FORMATS, build_export, render
from flagopt.study import study_data


def add(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("export", help="write the study's confirmed winner as a deployable patch (env.sh, json, "
                                      "xla-flags); without one, say 'keep the deployed job' and exit 1",
                       **examples("python -m flagopt export demo -o patch.env.sh"))
    p.add_argument("study")
    add_storage(p)
    p.add_argument("--trial", type=int, default=None, metavar="N",
                   help="export trial N instead of the confirmed winner, e.g. to trial the best estimate of a study "
                        "that confirmed none (the patch says UNCONFIRMED)")
    p.add_argument("--format", choices=FORMATS, default="env.sh", help="default: env.sh")
    p.add_argument("-o", "--output", metavar="FILE", default=None, help="write here instead of stdout")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    # Everything is computed before the file is opened: an error leaves no half-written patch behind.
    text, warnings = render(build_export(study_data(args.storage, args.study), args.trial), args.format)
    for line in warnings:
        print(line, file=sys.stderr)
    if args.output is None:
        sys.stdout.write(text)
        return 0
    path = Path(args.output)
    try:
        path.write_text(text)
        if args.format == "env.sh":
            path.chmod(0o644)
    except OSError as exc:
        raise FlagoptError(str(path), None, f"cannot write the export: {exc.strerror}") from None
    print(f"wrote {path}", file=sys.stderr)
    return 0
