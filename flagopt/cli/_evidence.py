"""``flagopt evidence PATH``: the collectives in an XLA dump, and threshold brackets to paste into a space;
``--same-as OTHER``: whether two dumps are the same program (exit 0) or not (exit 1)."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict

from flagopt.cli._common import console, examples
from flagopt.evidence import analyze, compare_programs, format_table, space_snippet, suggest_brackets


def add(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("evidence", help="analyse an XLA HLO dump: collectives, sizes, loops, pipelining; "
                                        "suggest combine-threshold brackets",
                       **examples("python -m flagopt evidence /tmp/xla_dump",
                                  "python -m flagopt evidence /tmp/dump_flag_on --same-as /tmp/dump_deployed"))
    p.add_argument("path", help="an --xla_dump_to directory or one *after_optimizations*.txt")
    p.add_argument("--module", default=None, help="pick this module in a dump directory (substring of the file name)")
    p.add_argument("--json", action="store_true", help="print the analysis as JSON")
    p.add_argument("--no-brackets", action="store_true", help="leave out the suggested params: snippet")
    p.add_argument("--same-as", metavar="OTHER", default=None,
                   help="instead: compare with another dump of the same job (e.g. the deployed flags against one "
                        "flag more). Exit 0 when the optimized modules are the same program once autotuning "
                        "choices and metadata are left out (the flag cannot change speed), 1 when they differ")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    if args.same_as is not None:
        return _same(args)
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


def _same(args: argparse.Namespace) -> int:
    comparison = compare_programs(args.path, args.same_as, module=args.module)
    if args.json:
        print(json.dumps(asdict(comparison), indent=1))
        return 0 if comparison.same else 1
    out = console()
    out.print(f"{comparison.first}\n{comparison.second}\n{comparison.summary()}", markup=False)
    for label, lines in (("only in the first", comparison.only_first), ("only in the second", comparison.only_second)):
        for line in lines:
            out.print(f"  {label}: {line[:200]}", markup=False, soft_wrap=True)
    return 0 if comparison.same else 1
