"""Whether two XLA dumps are the same program: a flag that leaves the optimized module unchanged cannot change speed.

Two compiles of one job differ in what autotuning picked (a GEMM's cuBLAS algorithm, a fusion's emitter), in
metadata, ids and fingerprints; none of that is the program. What is left, one normalised line per instruction, is
compared as a multiset, so instructions the scheduler placed in another order still count as the same program
(their count is reported). On the 2xH200 FSDP job, ``--xla_gpu_enable_pipelined_reduce_scatter`` unset, ``=true``
and ``=false`` gave the same program (docs/validation/h200x2/engine25-head3/NOTES.md), though a Plackett-Burman
screen had credited ``=true`` with +1.1 %.

Example:
    >>> same_text = "ENTRY %main {\\n  %dot.1 = f32[4] dot(%a, %b), metadata={op_name=\\"x\\"}\\n}"
    >>> other = same_text.replace('op_name=\\\\"x\\\\"', 'op_name=\\\\"y\\\\"')
    >>> compare_texts(same_text, other).same
    True
"""

from __future__ import annotations

import difflib
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from flagopt.evidence._analyze import module_file

#: What varies between compiles of one program: metadata, ids, backend configs (autotuned algorithms, emitters; the
#: attribute runs to the end of its line), the fusion kind an emitter implies, fingerprints of the module.
_NOISE = [
    (re.compile(r", metadata=\{[^}]*\}"), ""),
    (re.compile(r"\b(stack_frame_id|channel_id)=\d+"), ""),
    (re.compile(r",? ?backend_config=.*$"), ""),
    (re.compile(r"\bkind=k[A-Za-z]+"), ""),
    (re.compile(r'fingerprint[a-z_]*="[0-9a-f]+"'), ""),
]


@dataclass(frozen=True)
class ProgramComparison:
    """Two optimized modules compared instruction by instruction, autotuning choices and metadata left out."""

    first: str
    second: str
    same: bool
    reordered: int  # instructions (of the same program) at another place in the schedule
    only_first: tuple[str, ...]  # normalised instructions only the first has (the first few)
    only_second: tuple[str, ...]
    differing: int  # instructions in one and not the other, both sides counted

    def summary(self) -> str:
        """One line for people."""
        if self.same:
            order = f"; {self.reordered} in another order" if self.reordered else ""
            return f"same program: the same instructions once autotuning choices and metadata are left out{order}"
        return f"different programs: {self.differing} instructions are in one and not the other"


#: Tables of source locations a dump carries before its computations: where the job's code lives, not the program.
_LOCATION_TABLES = {"FileNames", "FunctionNames", "FileLocations", "StackFrames"}
_TABLE_ROW = re.compile(r"\d+ ")


def normalise(text: str) -> list[str]:
    """The module's lines with what varies between compiles of one program removed (blank lines dropped)."""
    out = []
    in_table = False
    for line in text.splitlines():
        if line.strip() in _LOCATION_TABLES:
            in_table = True
            continue
        if in_table and _TABLE_ROW.match(line):
            continue
        in_table = False
        for pattern, repl in _NOISE:
            line = pattern.sub(repl, line)
        line = line.rstrip()
        if line:
            out.append(line)
    return out


def _shown(only: Counter, keep: int) -> tuple[str, ...]:
    """The first few lines of one side's surplus, instructions first: a lone brace says nothing."""
    lines = list(only.elements())
    return tuple(([line for line in lines if " = " in line] or lines)[:keep])


def compare_texts(first: str, second: str, names: tuple[str, str] = ("first", "second"),
                  keep: int = 5) -> ProgramComparison:
    """Compare two optimized HLO module texts (see the module docstring for what is left out)."""
    a, b = normalise(first), normalise(second)
    only_a, only_b = Counter(a) - Counter(b), Counter(b) - Counter(a)
    same = not only_a and not only_b
    moved = 0
    if same:
        # Only the stretch between the common head and tail can hold a moved instruction: difflib is quadratic in
        # the worst case (18 s on 55,000 lines), and a study compares every XLA-only probe with the deployed job.
        head = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), len(a))
        tail = next((i for i, (x, y) in enumerate(zip(reversed(a[head:]), reversed(b[head:]))) if x != y),
                    len(a) - head)
        middle_a, middle_b = a[head:len(a) - tail], b[head:len(b) - tail]
        ops = difflib.SequenceMatcher(None, middle_a, middle_b, autojunk=False).get_opcodes()
        moved = sum(i2 - i1 for tag, i1, i2, _, _ in ops if tag != "equal")
    return ProgramComparison(
        first=names[0], second=names[1], same=same, reordered=moved,
        only_first=_shown(only_a, keep), only_second=_shown(only_b, keep),
        differing=sum(only_a.values()) + sum(only_b.values()),
    )  # fmt: skip


def compare_programs(first: str | Path, second: str | Path, module: str | None = None) -> ProgramComparison:
    """Compare the optimized modules of two dumps (directories: the module :func:`module_file` picks, e.g. the
    train step; or two ``*after_optimizations.txt`` files).

    Raises:
        FlagoptError: a path does not exist or holds no optimized module.
    """
    path_a, path_b = (module_file(p, module)[0] for p in (first, second))
    return compare_texts(*(p.read_bytes().decode("utf-8", errors="replace") for p in (path_a, path_b)),
                         names=(str(path_a), str(path_b)))
