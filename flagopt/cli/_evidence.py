"""``flagopt evidence PATH``: the collectives in an XLA dump, and threshold brackets to paste into a space."""

from __future__ import annotations

import argparse

from flagopt.cli._common import console, examples
from flagopt.evidence import analyze, format_table, space_snippet, suggest_brackets


def add(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("evidence", help="analyse an XLA HLO dump: collectives, sizes, loops, pipelining; "
                                        "suggest combine-threshold brackets",
                       **examples("python -m flagopt evidence /tmp/xla_dump"))
    p.add_argument("path", help="an --xla_dump_to directory or one *after_optimizations*.txt")
    p.add_argument("--module", default=None, help="pick this module in a dump directory (substring of the file name)")
    p.add_argument("--json", action="store_true", help="print the analysis as JSON")
    p.add_argument("--no-brackets", action="store_true", help="leave out the suggested params: snippet")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    evidence = analyze(args.path, module=args.module)
    if args.json:
        print(evidence.to_json())
        return 0
    out = console()
    out.print(format_table(evidence), markup=False)
    brackets = suggest_brackets(evidence)
    if brackets and not args.no_brackets:
        out.print("\nThreshold brackets from these sizes (paste under params:):\n", markup=False)
        out.print(space_snippet(brackets), markup=False)
    return 0
