"""``flagopt compare A B``: the same settings' effects in two studies side by side (e.g. one model on two
parallelisms, or on two clusters: ``--storage-b``).

Each study's Δ% is against its own baseline-deployed: the table compares effects, not raw throughput. A setting
is matched by what it changes (its flags, env and args), not by its profile name.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict, dataclass

from rich.table import Table

from flagopt.cli._common import add_storage, console, examples
from flagopt.study import Arm, StudyData, compact_settings, param_names, study_data


@dataclass(frozen=True)
class Effect:
    """One arm of one study: its gain vs that study's baseline-deployed (fractions), verdict and runs."""

    gain: float | None
    lo: float | None
    hi: float | None
    verdict: str
    runs: int

    def text(self) -> str:
        if self.gain is None:
            return f"- ({self.verdict}, {self.runs} runs)"
        ci = "" if self.lo is None else f" [{100 * self.lo:+.1f}, {100 * self.hi:+.1f}]"
        return f"{100 * self.gain:+.2f} %{ci} {self.verdict}, {self.runs} run{'s' if self.runs != 1 else ''}"


@dataclass(frozen=True)
class Row:
    settings: str
    a: Effect | None
    b: Effect | None


def add(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("compare", help="two studies side by side: each setting's gain in both (e.g. two "
                                       "parallelisms, two clusters)",
                       **examples("python -m flagopt compare llama3-8b-pp2-fsdp8 llama3-8b-fsdp8",
                                  "python -m flagopt compare demo demo --storage-b sqlite:///other/flagopt.db"))
    p.add_argument("study_a", metavar="A")
    p.add_argument("study_b", metavar="B")
    add_storage(p)
    p.add_argument("--storage-b", metavar="URL", default=None, help="B's storage when it is another (default: --storage)")
    p.add_argument("--json", action="store_true", help="machine-readable rows")
    p.set_defaults(handler=run)


def _key(arm: Arm) -> str:
    if arm.kind in ("baseline-no-env", "baseline-deployed"):
        return arm.kind
    settings = arm.first.attrs.get("settings") or {}
    return json.dumps({g: settings.get(g) or {} for g in ("xla", "libtpu", "env", "args")}, sort_keys=True,
                      default=str)


def _effects(data: StudyData) -> dict[str, tuple[Arm, Effect]]:
    out = {}
    for arm in data.arms:
        if arm.kind == "baseline-deployed":
            continue  # 0 % by definition in both
        est = arm.reported
        effect = Effect(None if est is None else est.gain, None if est is None else est.lo,
                        None if est is None else est.hi, arm.verdict, arm.n)
        out[_key(arm)] = (arm, effect)
    return out


def compare_rows(a: StudyData, b: StudyData) -> list[Row]:
    """Every setting tried in either study, those measured in both first, then by the larger gain."""
    ea, eb = _effects(a), _effects(b)
    names = {**param_names(b.space), **param_names(a.space)}
    rows = []
    for key in [*ea, *(k for k in eb if k not in ea)]:
        arm = (ea.get(key) or eb[key])[0]
        label = arm.label if arm.kind == "baseline-no-env" else \
            (compact_settings(arm.first.attrs.get("settings"), names) or arm.label)
        rows.append(Row(label, ea[key][1] if key in ea else None, eb[key][1] if key in eb else None))

    def order(row: Row) -> tuple[int, float]:
        gains = [e.gain for e in (row.a, row.b) if e is not None and e.gain is not None]
        return (0 if row.a and row.b else 1, -max(gains, default=float("-inf")))

    return sorted(rows, key=order)


def run(args: argparse.Namespace) -> int:
    a = study_data(args.storage, args.study_a)
    b = study_data(args.storage_b or args.storage, args.study_b)
    rows = compare_rows(a, b)
    if args.json:
        print(json.dumps({"a": {"study": a.name, "verdict": a.verdict}, "b": {"study": b.name, "verdict": b.verdict},
                          "rows": [asdict(r) for r in rows]}, indent=2, default=str))
        return 0
    out = console()
    title_a = f"{a.name} ({a.parallelism or a.model_tag})"
    title_b = f"{b.name} ({b.parallelism or b.model_tag})"
    table = Table(title="Δ% vs each study's own baseline-deployed (drift-corrected)")
    table.add_column("settings", overflow="fold")
    table.add_column(title_a, justify="right", overflow="fold")
    table.add_column(title_b, justify="right", overflow="fold")
    for row in rows:
        table.add_row(row.settings, row.a.text() if row.a else "not tried", row.b.text() if row.b else "not tried")
    out.print(table)
    for data in (a, b):
        verdict = data.verdict or {}
        out.print(f"{data.name}: verdict ({verdict.get('reason', 'none yet')}): {verdict.get('message', '-')}",
                  markup=False)
    return 0
