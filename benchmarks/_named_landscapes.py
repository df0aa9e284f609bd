"""The named landscapes a benchmark runs: the shipped ones, or those of a landscapes file of one's own.

A file of one's own has the schema of ``flagopt/workloads/landscapes.yaml``. Every landscape chosen is read before
any study starts, so a bad entry is one error naming the file and the key, not an hour of studies that each fail.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

import yaml

from benchmarks._metrics import landscape_kind
from flagopt.errors import FlagoptError
from flagopt.workloads.sim import landscape_from_data

#: The shipped landscapes (``flagopt/workloads/landscapes.yaml``), in the order the tables list them.
LANDSCAPES = ("win10", "fsdp64", "pp64", "h200x2", "null", "ppmb", "pair", "oomcliff", "flaky", "below5",
              "h200x2-measured")
#: Landscapes whose target (false winner <= 2 %) needs >= 50 seeds: ``--null-seeds`` applies to them.
NULL_LANDSCAPES = ("null", "rand-null", "rand-null-flaky")


def add_landscape_arguments(parser: argparse.ArgumentParser, default: str, file_note: str) -> None:
    """``--landscapes`` (shipped names, ``default`` when none is given) and ``--landscape-file`` (``file_note``: what
    a file's landscapes are to this benchmark); :func:`named_landscapes` reads them."""
    parser.add_argument("--landscapes", nargs="*", default=None, metavar="NAME",
                        help=f"shipped landscapes, of {', '.join(LANDSCAPES)} (default: {default}; none with an empty "
                             "list); with --landscape-file, names in that file (default: all of them)")
    parser.add_argument("--landscape-file", type=Path, default=None, metavar="FILE",
                        help="landscapes of your own, in the schema of flagopt/workloads/landscapes.yaml "
                             f"({file_note})")


def named_landscapes(path: Path | None, named: Sequence[str] | None) -> tuple[list[str], set[str]]:
    """The landscapes to run (``named``, or all of them: the shipped ones, or ``path``'s), and those among them that
    take ``--null-seeds``: ``null``, and in a file of one's own each whose true best is the deployed job (its target
    is the false-winner rate, which needs >= 50 seeds). Raises ``ValueError`` with the option, file, key and reason.

    Example:
        >>> named_landscapes(None, ["win10", "null"])
        (['win10', 'null'], {'null'})
    """
    if path is None:
        unknown = [n for n in named or () if n not in LANDSCAPES]
        if unknown:
            raise ValueError(f"--landscapes: unknown {', '.join(map(repr, unknown))}; choose from "
                             f"{', '.join(LANDSCAPES)} (or give --landscape-file)")
        chosen = list(LANDSCAPES) if named is None else list(named)
        return chosen, {n for n in chosen if n in NULL_LANDSCAPES}
    try:
        return _from_file(path, named)
    except FlagoptError as exc:
        raise ValueError(f"--landscape-file: {exc}") from None
    except OSError as exc:
        raise ValueError(f"--landscape-file: {path}: cannot read it: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        raise ValueError(f"--landscape-file: {path}: not valid YAML: {exc}") from None


def _from_file(path: Path, named: Sequence[str] | None) -> tuple[list[str], set[str]]:
    data = yaml.safe_load(path.read_text())
    if not isinstance(data, dict) or not data or not all(isinstance(n, str) for n in data):
        raise FlagoptError(str(path), "landscapes", "a mapping of landscape names to entries, at least one")
    names = list(data)
    chosen = names if named is None else list(named)
    unknown = [n for n in chosen if n not in names]
    if unknown:
        raise FlagoptError(str(path), "landscapes", f"no landscape {', '.join(map(repr, unknown))} in this file; "
                           f"it has {', '.join(names)}")
    nulls = set()
    for name in chosen:
        try:
            land = landscape_from_data(name, data[name], path)  # the file parsed once, not once per name
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            what = f"missing key {exc}" if isinstance(exc, KeyError) else str(exc)
            raise FlagoptError(str(path), name, f"not a landscape entry: {what}") from None
        if landscape_kind(land.best().gain) == "null":
            nulls.add(name)
    return chosen, nulls
