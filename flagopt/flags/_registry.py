"""The XLA flag registry: type, default, valid values and which jaxlib versions accept each flag.

The table is data (``flags.csv``, shipped with the package); a user can add or override rows with their own
CSV of the same columns. Versions come from a local test of PyPI jaxlib wheels, so "removed in X" means the
previous tested wheel accepted the flag and X rejected it.

Example:
    >>> registry = FlagRegistry.load()
    >>> registry.removal_note("--xla_gpu_enable_async_collectives=true")
    'removed in jaxlib 0.4.28 (last accepted by 0.4.25); replaced by xla_gpu_disable_async_collectives'
    >>> registry.default("xla_gpu_all_gather_combine_threshold_bytes")
    '31457287'
"""

from __future__ import annotations

import csv
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from flagopt.errors import FlagoptError

_COLUMNS = (
    "name", "type", "xla_default", "valid_values", "first_accepted", "last_accepted", "removed_in", "renamed_to",
    "note",
)  # fmt: skip
_TESTED_MARK = "# tested_jaxlib:"
_BOOL_TRUE = {"true", "1"}
_BOOL_FALSE = {"false", "0"}


def version_tuple(version: str) -> tuple[int, ...]:
    """``"0.4.28"`` -> ``(0, 4, 28)``; a suffix such as ``.dev20250101`` or ``rc1`` is ignored."""
    parts: list[int] = []
    for piece in version.strip().split(".")[:3]:
        digits = ""
        for ch in piece:
            if not ch.isdigit():
                break
            digits += ch
        parts.append(int(digits or 0))
    return tuple(parts)


def flag_name(token: str) -> str:
    """The bare flag name of ``--name=value``, ``-–name`` (an en-dash typo) or ``name``."""
    return token.strip().lstrip("-\u2013\u2014\u2212").split("=", 1)[0]


@dataclass(frozen=True)
class FlagInfo:
    """One registry row; empty strings mean "not known"."""

    name: str
    type: str
    xla_default: str
    valid_values: str
    first_accepted: str
    last_accepted: str
    removed_in: str
    renamed_to: str
    note: str


class FlagRegistry:
    """Known XLA flags, looked up by name (``--`` prefix and ``=value`` are ignored)."""

    def __init__(self, flags: dict[str, FlagInfo], tested_jaxlib: tuple[str, ...]) -> None:
        self._flags = dict(flags)
        self.tested_jaxlib = tested_jaxlib

    @classmethod
    def load(cls, *extra: str | Path) -> FlagRegistry:
        """The shipped table, then each ``extra`` CSV (same columns) adding or replacing rows."""
        text = resources.files("flagopt.flags").joinpath("flags.csv").read_text(encoding="utf-8")
        flags, tested = _read(text, "flags.csv")
        for path in extra:
            more, more_tested = _read(Path(path).read_text(encoding="utf-8"), str(path))
            flags.update(more)
            tested = more_tested or tested
        return cls(flags, tested)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and flag_name(name) in self._flags

    def __iter__(self) -> Iterator[FlagInfo]:
        return iter(self._flags.values())

    def __len__(self) -> int:
        return len(self._flags)

    def get(self, name: str) -> FlagInfo | None:
        """The row for ``name``, or ``None`` if the registry does not know the flag."""
        return self._flags.get(flag_name(name))

    def default(self, name: str) -> str | None:
        """XLA's default value as text, or ``None`` where unknown."""
        info = self.get(name)
        return info.xla_default if info and info.xla_default else None

    def accepted_by(self, name: str, jaxlib: str) -> bool:
        """Whether ``jaxlib`` accepts the flag; ``True`` when the registry cannot tell (unknown flag, untested gap)."""
        return self.status(name, jaxlib) not in ("removed", "not-yet")

    def status(self, name: str, jaxlib: str) -> str:
        """``accepted``, ``removed``, ``not-yet`` (added later) or ``unknown`` for ``jaxlib``."""
        info = self.get(name)
        if info is None:
            return "unknown"
        version = version_tuple(jaxlib)
        newest = version_tuple(self.tested_jaxlib[-1]) if self.tested_jaxlib else ()
        if not info.first_accepted:
            # Rejected by every tested wheel: a newer, untested one may have it.
            return "unknown" if not newest or version > newest else "not-yet"
        if info.removed_in and version >= version_tuple(info.removed_in):
            return "removed"
        if version < version_tuple(info.first_accepted):
            return "not-yet"
        if version_tuple(info.first_accepted) <= version <= version_tuple(info.last_accepted):
            return "accepted"
        return "unknown" if info.removed_in else "accepted"

    def removal_note(self, name: str) -> str | None:
        """Why a recent jaxlib rejects the flag, e.g. ``"removed in jaxlib 0.4.28 (last accepted by 0.4.25)"``.

        ``None`` when the flag is accepted by the newest tested jaxlib or the registry does not know it.
        """
        info = self.get(name)
        if info is None:
            return None
        if info.removed_in:
            note = f"removed in jaxlib {info.removed_in} (last accepted by {info.last_accepted})"
            if info.renamed_to:
                note += f"; renamed to {info.renamed_to}"
            elif "replaced by" in info.note:
                note += "; " + info.note[info.note.index("replaced by") :].split(";", 1)[0]
            return note
        if not info.first_accepted and self.tested_jaxlib:
            span = f"{self.tested_jaxlib[0]}..{self.tested_jaxlib[-1]}"
            return f"not accepted by any tested jaxlib ({span})" + (f"; {info.note}" if info.note else "")
        return None

    def added_note(self, name: str) -> str | None:
        """``"added in jaxlib 0.5.3"`` for a flag that older wheels reject, else ``None``."""
        info = self.get(name)
        if info and info.first_accepted and self.tested_jaxlib and info.first_accepted != self.tested_jaxlib[0]:
            return f"added in jaxlib {info.first_accepted}"
        return None

    def check_value(self, name: str, value: str) -> str | None:
        """Why XLA would reject ``value`` for a bool/int flag at parse time, or ``None`` if it looks valid.

        Mirrors tsl's flag parser (measured with jaxlib 0.10.2): bools take ``true/false/1/0`` in any case, ints
        take an optional sign and decimal digits only (``1e3``, ``0x10``, ``1.5`` and ``""`` abort the job).
        """
        info = self.get(name)
        if info is None:
            return None
        if info.type == "bool" and value.lower() not in _BOOL_TRUE | _BOOL_FALSE:
            return f"{info.name} is a bool: use true or false, not {value!r}"
        if info.type.startswith("int") and not value.lstrip("+-").isdigit():
            return f"{info.name} is an integer: {value!r} is not a decimal number"
        if info.type == "enum" and info.valid_values and value not in info.valid_values.split("|"):
            return f"{info.name} takes one of {info.valid_values.replace('|', ', ')}, not {value!r}"
        return None


def _read(text: str, source: str) -> tuple[dict[str, FlagInfo], tuple[str, ...]]:
    tested: tuple[str, ...] = ()
    body = []
    for line in text.splitlines():
        if line.startswith(_TESTED_MARK):
            tested = tuple(line[len(_TESTED_MARK) :].split())
        elif not line.startswith("#"):
            body.append(line)
    reader = csv.DictReader(body)
    if reader.fieldnames is None or tuple(reader.fieldnames) != _COLUMNS:
        raise FlagoptError(source, None, f"expected the columns {','.join(_COLUMNS)}, got {reader.fieldnames}")
    flags: dict[str, FlagInfo] = {}
    for number, row in enumerate(reader, start=2):
        if not row["name"]:
            raise FlagoptError(source, f"line {number}", "a row needs a flag name")
        flags[row["name"]] = FlagInfo(**{key: (row[key] or "").strip() for key in _COLUMNS})
    return flags, tested
