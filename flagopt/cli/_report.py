"""``flagopt report STUDY``: ``<model_tag>-tuning.md`` and a self-contained HTML page of figures."""

from __future__ import annotations

import argparse
import sys

from flagopt.cli._common import add_storage, examples
from flagopt.report import write_report
from flagopt.study import shown_url, study_data


def add(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("report", help="write the study's markdown report and HTML figures",
                       **examples("python -m flagopt report demo -o reports/"))
    p.add_argument("study")
    add_storage(p)
    p.add_argument("-o", "--output", metavar="DIR", default=".", help="folder to write into (default: .)")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    md, page = write_report(study_data(args.storage, args.study), args.output,
                            storage_hint=args.storage and shown_url(args.storage))
    print(f"wrote {md}\nwrote {page}", file=sys.stderr)
    return 0
