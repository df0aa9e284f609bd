"""Find the collectives of a step in an XLA dump: kinds, sizes, async pairs, loops, scheduling markers.

Example:
    >>> from pathlib import Path
    >>> import tempfile
    >>> text = ("HloModule m\\n\\nENTRY %main (p: f32[256]) -> f32[256] {\\n"
    ...         "  ROOT %ar = f32[256]{0} all-reduce(%p), replica_groups=[1,2]<=[2], to_apply=%add\\n}\\n")
    >>> path = Path(tempfile.mkdtemp()) / "m.txt"
    >>> _ = path.write_text(text)
    >>> ev = analyze(path)
    >>> [(c.kind, c.bytes, c.replica_groups.groups) for c in ev.collectives]
    [('all-reduce', 1024, ((0, 1),))]
"""

from __future__ import annotations

import math
import re
from pathlib import Path

from flagopt.errors import FlagoptError
from flagopt.evidence._groups import parse_pairs, parse_replica_groups
from flagopt.evidence._hlo import ArrayShape, Computation, HloModuleText, Instr, parse_module, parse_shape
from flagopt.evidence._model import KINDS, Collective, HloEvidence, Loop

_SYNC = frozenset(KINDS) - {"send", "recv"}
_START = {f"{k}-start": k for k in _SYNC}
_P2P = {"send": "send-done", "recv": "recv-done"}
_TRANSPARENT = {"body", "condition", "branch_computations", "true_computation", "false_computation"}
_SCHED_KEYS = ("_xla_send_recv_pipeline", "_xla_send_recv_validation", "_xla_send_recv_source_target_pairs",
               "scheduling_group_id", "_scheduling_group_id", "_xla_scheduling_group_id",
               "_xla_stream_annotation", "trivially_pipelineable")  # fmt: skip
_ANY_COLLECTIVE = re.compile(r"\b(?:%s)(?:-start)?\(" % "|".join(map(re.escape, sorted(KINDS))))
_HINT = "dump with XLA_FLAGS='--xla_dump_to=DIR --xla_dump_hlo_as_text' and pass DIR or one *after_optimizations.txt"


class _Module:
    """Parsed text plus the call graph the collective search needs."""

    def __init__(self, text: HloModuleText) -> None:
        self.text = text
        self.comps = text.computations
        self.callers: dict[str, list[tuple[Computation, Instr, str]]] = {}
        for comp in self.comps.values():
            for ins in comp.instrs:
                for role, callee in ins.callees():
                    self.callers.setdefault(callee, []).append((comp, ins, role))

    def is_wrapped(self, comp: str) -> bool:
        """Called as the inside of another op (fusion, async wrapper, reducer), not as executed control flow."""
        return any(
            role not in _TRANSPARENT and not (ins.opcode == "call" and role == "to_apply")
            for _, ins, role in self.callers.get(comp, [])
        )

    def loop_chain(self, comp: str) -> list[Instr]:
        chain, seen = [], {comp}
        while self.callers.get(comp):
            parent, ins, _ = self.callers[comp][0]
            if ins.opcode == "while":
                chain.insert(0, ins)
            if parent.name in seen:
                break
            seen.add(parent.name)
            comp = parent.name
        return chain

    def inner_collective(self, ins: Instr, depth: int = 0) -> Instr | None:
        """The collective an ``async-start`` or ``fusion`` wraps, if any."""
        for _, callee in ins.callees():
            comp = self.comps.get(callee)
            for inner in comp.instrs if comp and depth < 4 else []:
                if inner.opcode in _SYNC:
                    return inner
                found = self.inner_collective(inner, depth + 1) if inner.callees() else None
                if found is not None:
                    return found
        return None

    def users(self, comp: Computation, name: str) -> list[Instr]:
        return [i for i in comp.instrs if name in i.operands]

    def find_done(self, comp: Computation, start: Instr, opcodes: set[str]) -> tuple[Instr, Computation] | None:
        for c in [comp, *(x for x in self.comps.values() if x is not comp)]:
            name = start.name
            for ins in c.instrs:
                if ins.opcode == "async-update" and ins.operands[:1] == [name]:
                    name = ins.name  # async-start -> async-update -> async-done
                elif ins.opcode in opcodes and ins.operands[:1] == [name]:
                    return ins, c
        return None


def _trip_count(ins: Instr) -> int | None:
    n = ins.backend_config().get("known_trip_count", {}).get("n")
    return int(n) if n is not None and str(n).isdigit() else None


def _scheduling(instrs: list[Instr]) -> tuple[dict[str, str], dict[str, str], dict]:
    front: dict[str, str] = {}
    coll: dict = {}
    sched: dict[str, str] = {}
    for ins in instrs:  # inner op first, the async wrapper overrides
        front.update(ins.frontend_attributes())
        config = ins.backend_config()
        coll.update(config.get("collective_backend_config", {}))
        for key in ("scheduling_group_id", "force_earliest_schedule"):
            if config.get(key) not in (None, False, "", 0):
                sched[key] = str(config[key])
        if ins.attr("scheduling_group_id") is not None:
            sched["scheduling_group_id"] = ins.attr("scheduling_group_id") or ""
    sched |= {k: v for k, v in front.items() if k in _SCHED_KEYS}
    sched |= {k: "true" for k in ("is_pipelined", "is_sync") if coll.get(k) is True}
    return front, sched, coll


def _payload(ins: Instr) -> list[ArrayShape]:
    """The data a collective moves, from its own shape (used when no matching -done was read)."""
    leaves = [leaf for leaf in parse_shape(ins.shape) if leaf.dtype != "token"]
    if ins.opcode in ("send", "recv") or ins.opcode in ("collective-permute-start",):
        leaves = leaves[1:2] if ins.opcode == "collective-permute-start" else leaves[:1]
    elif ins.opcode in ("all-gather-start", "all-to-all-start") and ins.shape.startswith("(("):
        leaves = leaves[len(leaves) // 2 :]  # ((operands), (results))
    elif ins.opcode == "all-gather-start" and len(leaves) == 2:
        leaves = leaves[1:]
    return leaves


def _collect(mod: _Module) -> tuple[list[Collective], list[Loop]]:
    found: list[Collective] = []
    loops: list[Loop] = []
    for comp in mod.comps.values():
        if mod.is_wrapped(comp.name):
            continue
        chain = mod.loop_chain(comp.name)
        trips = [_trip_count(w) for w in chain]
        executions = None if None in trips else math.prod(t for t in trips if t is not None)
        for ins in comp.instrs:
            if ins.opcode == "while":
                cond = ins.attr("condition") or ""
                body = ins.attr("body") or ""
                loops.append(Loop(ins.name, comp.name, body.lstrip("%"), cond.lstrip("%"), _trip_count(ins)))
            inner, kind, done_ops = ins, None, set()
            if ins.opcode in _SYNC:
                kind = ins.opcode
            elif ins.opcode in _START:
                kind, done_ops = _START[ins.opcode], {ins.opcode[: -len("start")] + "done"}
            elif ins.opcode in _P2P:
                kind, done_ops = ins.opcode, {_P2P[ins.opcode]}
            elif ins.opcode in ("async-start", "fusion"):
                inner = mod.inner_collective(ins)
                if inner is None:
                    continue
                kind, done_ops = inner.opcode, {"async-done"} if ins.opcode == "async-start" else set()
            if kind is None:
                continue
            done = mod.find_done(comp, ins, done_ops) if done_ops else None
            if inner is not ins:
                leaves = [x for x in parse_shape(inner.shape) if x.dtype != "token"]
            elif done and ins.opcode in _START:
                leaves = [x for x in parse_shape(done[0].shape) if x.dtype != "token"]
            else:
                leaves = _payload(ins)
            crosses = bool(done and done[1] is not comp) or (
                bool(done_ops) and done is None and any(u.opcode in ("tuple", "while") for u in mod.users(comp, ins.name))
            )
            front, sched, coll = _scheduling([inner, ins] if inner is not ins else [ins])
            channel = inner.attr("channel_id")
            found.append(
                Collective(
                    name=ins.name, kind=kind, opcode=ins.opcode, computation=comp.name, line=ins.line,
                    shapes=tuple(str(x) for x in leaves), dtypes=tuple(dict.fromkeys(x.dtype for x in leaves)),
                    bytes=sum(x.nbytes for x in leaves), is_async=bool(done_ops),
                    done=done[0].name if done else None, done_computation=done[1].name if done else None,
                    crosses_iteration=crosses, loops=tuple(w.name for w in chain), executions=executions,
                    replica_groups=parse_replica_groups(inner.attr("replica_groups")),
                    source_target_pairs=parse_pairs(inner.attr("source_target_pairs")
                                                    or front.get("_xla_send_recv_source_target_pairs")),
                    channel_id=int(channel) if channel and channel.isdigit() else None,
                    frontend_attributes=front, collective_backend_config=coll, scheduling=sched,
                )  # fmt: skip
            )
    found.sort(key=lambda c: c.line)
    return found, loops


def find_modules(root: Path) -> list[Path]:
    """Every optimized-module text file under a dump directory (buffer assignments and the like excluded)."""
    return sorted(p for p in root.rglob("*after_optimizations.txt") if p.is_file())


def pick_module(root: Path, module: str | None = None) -> tuple[Path, str]:
    """Choose the train-step module of a dump directory, and say why.

    The rule: files whose name contains ``module`` (if given) or else ``train_step``, the largest of them;
    otherwise the largest file that contains a collective; otherwise the largest file.
    """
    files = find_modules(root)
    if not files:
        raise FlagoptError(str(root), None, f"no *after_optimizations.txt file under it; {_HINT}")
    size = lambda p: p.stat().st_size  # noqa: E731
    if module is not None:
        named = [p for p in files if module.lower() in p.name.lower()]
        if not named:
            listing = ", ".join(p.name for p in files[:5])
            raise FlagoptError(str(root), "module", f"no dump file name contains {module!r} (found: {listing})")
        return max(named, key=size), f"largest of {len(named)} file(s) whose name contains {module!r}"
    named = [p for p in files if "train_step" in p.name]
    if named:
        return max(named, key=size), f"largest of {len(named)} file(s) whose name contains 'train_step'"
    with_coll = [p for p in files if _ANY_COLLECTIVE.search(p.read_text(errors="replace"))]
    if with_coll:
        return max(with_coll, key=size), f"largest of {len(with_coll)} of {len(files)} modules with collectives"
    return max(files, key=size), f"largest of {len(files)} modules (none has collectives)"


def module_file(path: str | Path, module: str | None = None) -> tuple[Path, str]:
    """The optimized module file a path names (a dump directory: :func:`pick_module`'s choice), and why.

    Raises:
        FlagoptError: the path does not exist or holds no optimized module dump.
    """
    path = Path(path)
    if not path.exists():
        raise FlagoptError(str(path), None, f"no such file or directory; {_HINT}")
    return pick_module(path, module) if path.is_dir() else (path, "file given")


def analyze(path: str | Path, module: str | None = None) -> HloEvidence:
    """Read the collectives of one optimized HLO module.

    Args:
        path: an ``--xla_dump_to`` directory (the module is chosen by :func:`pick_module`) or one
            ``*after_optimizations.txt`` file.
        module: in a directory, a substring of the wanted module's file name (e.g. ``jit_train_step``).

    Raises:
        FlagoptError: the path does not exist or holds no optimized module dump.
    """
    path, selection = module_file(path, module)
    text = parse_module(path.read_bytes().decode("utf-8", errors="replace"))
    collectives, loops = _collect(_Module(text))
    return HloEvidence(
        source=str(path), module=text.name, lines_read=text.lines_read, truncated=text.truncated,
        collectives=tuple(collectives), loops=tuple(loops), warnings=tuple(text.warnings), selection=selection,
    )  # fmt: skip
