"""``flagopt validate --space FILE [--preflight]``: check a space file without running anything."""

from __future__ import annotations

import argparse

from flagopt.cli._common import console, examples
from flagopt.space import load_space


def add(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("validate", help="check a search-space file (and, with --preflight, its flags against the installed XLA)",
                       **examples("python -m flagopt validate --space search_spaces/demo.yaml --preflight"))
    p.add_argument("--space", required=True, metavar="FILE")
    p.add_argument("--preflight", action="store_true",
                   help="also start XLA (CPU) with every flag value the space can produce and report unknown flags")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    space = load_space(args.space)
    out = console()
    n_profiles = len(space.profiles)
    out.print(f"{args.space}: ok — study {space.name!r}, {len(space.params)} params, {n_profiles} profiles, "
              f"executor {space.executor.kind}")
    if args.preflight:
        from flagopt.cli._preflight import run_preflight
        result = run_preflight(space, out)
        return 0 if result.report.status != "failed" else 2
    return 0
