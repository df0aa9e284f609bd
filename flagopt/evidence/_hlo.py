"""A tolerant reader for XLA's HLO text dumps (``*after_optimizations.txt``).

It reads computations and instructions, nothing more: shapes, opcodes, operands and the raw attribute text.
Unknown opcodes and attributes are kept as text, and a file cut off mid-way yields what was read plus a warning.

Example:
    >>> m = parse_module("HloModule m\\n\\nENTRY %main (p: f32[2]) -> f32[2] {\\n"
    ...                  "  ROOT %ar = f32[2]{0} all-reduce(%p), replica_groups={{0,1}}, to_apply=%add\\n}\\n")
    >>> m.entry, m.computations["main"].instrs[0].opcode
    ('main', 'all-reduce')
    >>> shape_bytes("(bf16[4,8]{1,0}, f32[], token[])")
    68
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import Any

# Bits per element as XLA stores them; sub-byte types take a whole byte unless the layout packs them (E(n)).
_BITS: dict[str, int] = {
    "pred": 8, "s1": 1, "u1": 1, "s2": 2, "u2": 2, "s4": 4, "u4": 4, "s8": 8, "u8": 8,
    "s16": 16, "u16": 16, "f16": 16, "bf16": 16, "s32": 32, "u32": 32, "f32": 32,
    "s64": 64, "u64": 64, "f64": 64, "c64": 64, "c128": 128, "token": 0,
}  # fmt: skip
_F8_OR_F4 = re.compile(r"^f(8|4|6)e\d+m\d+\w*$")

_HEADER = re.compile(r"^(ENTRY\s+)?%?([\w.\-]+)\s*(\(.*\)\s*->\s*.*)?\{\s*$")
_INSTR = re.compile(r"^\s*(ROOT\s+)?%?([\w.\-]+)\s*=\s*(.*)$")
_LEAF = re.compile(r"\b([a-z][a-z0-9]*)\[([^\]]*)\](\{[^}]*\})?")
_CALLEE_KEYS = ("calls", "body", "condition", "to_apply", "branch_computations",
                "true_computation", "false_computation")  # fmt: skip


@dataclass(frozen=True)
class ArrayShape:
    """One array leaf of an HLO shape, e.g. ``bf16[4096,16384]``."""

    dtype: str
    dims: tuple[int, ...]
    packed_bits: int | None = None  # from an ``E(n)`` layout

    @property
    def nbytes(self) -> int:
        bits = self.packed_bits or _BITS.get(self.dtype) or (8 if _F8_OR_F4.match(self.dtype) else 0)
        if self.packed_bits is None:
            bits = max(bits, 8) if bits else 0
        return math.ceil(math.prod(self.dims) * bits / 8)

    def __str__(self) -> str:
        return f"{self.dtype}[{','.join(map(str, self.dims))}]"


def parse_shape(text: str) -> list[ArrayShape]:
    """Every array leaf of a shape (tuples flattened, tokens kept with 0 bytes), in order."""
    leaves = []
    for dtype, dims, layout in _LEAF.findall(text):
        sizes = tuple(int(d.lstrip("<=").strip()) for d in dims.split(",") if d.strip().lstrip("<=").isdigit())
        packed = re.search(r"E\((\d+)\)", layout or "")
        leaves.append(ArrayShape(dtype, sizes, int(packed.group(1)) if packed else None))
    return leaves


def shape_bytes(text: str) -> int:
    """Bytes of every array leaf in a shape."""
    return sum(leaf.nbytes for leaf in parse_shape(text))


@dataclass
class Instr:
    """One HLO instruction, with its attributes kept as raw text."""

    name: str
    shape: str
    opcode: str
    operands: list[str]
    attrs: str
    line: int
    root: bool = False

    def attr(self, key: str) -> str | None:
        return attribute(self.attrs, key)

    def callees(self) -> list[tuple[str, str]]:
        """``(role, computation)`` for every computation this instruction calls."""
        out = []
        for key in _CALLEE_KEYS:
            value = self.attr(key)
            if value:
                out += [(key, n) for n in re.findall(r"%?([\w.\-]+)", value.strip("{}"))]
        return out

    def frontend_attributes(self) -> dict[str, str]:
        value = self.attr("frontend_attributes")
        if not value:
            return {}
        pairs = (p.split("=", 1) for p in split_top(value.strip()[1:-1], ",") if "=" in p)
        return {k.strip(): v.strip().strip('"') for k, v in pairs}

    def backend_config(self) -> dict[str, Any]:
        return decode_json_attr(self.attr("backend_config"))


@dataclass
class Computation:
    name: str
    is_entry: bool
    line: int
    instrs: list[Instr] = field(default_factory=list)
    closed: bool = False

    def find(self, name: str) -> Instr | None:
        return next((i for i in self.instrs if i.name == name), None)


@dataclass
class HloModuleText:
    """The parsed text: computations by name, the entry's name, and what went wrong while reading."""

    name: str
    computations: dict[str, Computation]
    entry: str | None
    lines_read: int
    warnings: list[str]

    @property
    def truncated(self) -> bool:
        return any(not c.closed for c in self.computations.values()) or self.entry is None


def _scan(text: str, start: int, stop_chars: str) -> int:
    """Index of the first ``stop_chars`` character at bracket depth 0 outside quotes, from ``start``."""
    depth, quote, i = 0, "", start
    while i < len(text):
        ch = text[i]
        if quote:
            if ch == "\\":
                i += 1
            elif ch == quote:
                quote = ""
        elif ch in "\"'":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            if depth == 0 and ch in stop_chars:
                return i
            depth -= 1
        elif depth == 0 and ch in stop_chars:
            return i
        i += 1
    return len(text)


def split_top(text: str, sep: str) -> list[str]:
    """Split at ``sep`` characters that are outside brackets and quotes."""
    parts, start = [], 0
    while start <= len(text):
        end = _scan(text, start, sep)
        parts.append(text[start:end])
        start = end + 1
    return [p for p in parts if p.strip()]


def attribute(attrs: str, key: str) -> str | None:
    """The raw value of ``key=...`` at the top level of an instruction's attribute text."""
    for part in split_top(attrs, ","):
        k, eq, value = part.strip().partition("=")
        if eq and k.strip() == key:
            return value.strip()
    return None


def decode_json_attr(value: str | None) -> dict[str, Any]:
    """``backend_config`` as a dict, whether printed as JSON or (older XLA) as a quoted JSON string."""
    if not value:
        return {}
    try:
        decoded = json.loads(value)
        if isinstance(decoded, str):
            decoded = json.loads(decoded) if decoded.strip().startswith("{") else {}
    except ValueError:
        return {}
    return decoded if isinstance(decoded, dict) else {}


def _parse_instr(body: str, root: bool, name: str, line: int) -> Instr | None:
    body = re.sub(r"/\*.*?\*/", "", body)
    if body.startswith("("):
        end = _scan(body, 1, ")")
        shape, rest = body[: end + 1], body[end + 1 :].lstrip()
    else:
        shape, _, rest = body.partition(" ")
    match = re.match(r"([\w\-.$]+)\(", rest)
    if not match:
        return None
    close = _scan(rest, match.end(), ")")
    operands = [o.strip().split(" ")[-1].lstrip("%") for o in split_top(rest[match.end() : close], ",")]
    attrs = rest[close + 1 :].lstrip(", ")
    return Instr(name, shape, match.group(1), operands, attrs, line, root)


def parse_module(text: str) -> HloModuleText:
    """Parse HLO text; never raises on malformed or truncated input, it warns instead."""
    comps: dict[str, Computation] = {}
    entry: str | None = None
    current: Computation | None = None
    warnings: list[str] = []
    module = re.search(r"^HloModule\s+([\w.\-]+)", text, re.M)
    lines = text.splitlines()
    for no, line in enumerate(lines, 1):
        if current is None:
            head = _HEADER.match(line)
            if head:
                current = Computation(head.group(2), bool(head.group(1)), no)
                comps[current.name] = current
                entry = current.name if current.is_entry else entry
            continue
        if line.strip() == "}":
            current.closed, current = True, None
            continue
        m = _INSTR.match(line)
        instr = _parse_instr(m.group(3), bool(m.group(1)), m.group(2), no) if m else None
        if instr is not None:
            current.instrs.append(instr)
        elif line.strip() and no == len(lines):
            warnings.append(f"line {no}: last line is cut off: {line.strip()[:60]!r}")
    if current is not None:
        warnings.append(
            f"the file ends inside computation %{current.name} (opened at line {current.line}): it is truncated, "
            f"so collectives after line {len(lines)} are missing; re-dump with --xla_dump_to and enough disk"
        )
    if entry is None and comps:
        warnings.append("no ENTRY computation was read: the file is truncated or not an HLO module dump")
    if not comps:
        warnings.append("no HLO computation found: is this an XLA *after_optimizations.txt dump?")
    return HloModuleText(module.group(1) if module else "", comps, entry, len(lines), warnings)
