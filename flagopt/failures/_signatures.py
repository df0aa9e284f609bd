"""Failure signatures as data: load ``signatures.yaml`` (and extra entries from a space file) into regexes."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

import yaml

from flagopt.errors import FlagoptError
from flagopt.failure_classes import FAILURE_CLASSES


@dataclass(frozen=True)
class Signature:
    """Log lines that identify one failure class.

    Attributes:
        name: a short identifier, shown in the failure details.
        failure_class: one of :data:`FAILURE_CLASSES`.
        patterns: regexes searched line by line; named groups become details.
        requires_no_steps: the lines mean this class only if no step line was printed.
        reason: a human explanation used instead of the matched line.
    """

    name: str
    failure_class: str
    patterns: tuple[re.Pattern[str], ...]
    requires_no_steps: bool = False
    reason: str = ""


@dataclass(frozen=True)
class SignatureTable:
    """The parsed ``signatures.yaml``."""

    signatures: tuple[Signature, ...]
    noise: tuple[re.Pattern[str], ...]
    loss_pattern: re.Pattern[str]


def _compile(pattern: object, source: str, key: str) -> re.Pattern[str]:
    if not isinstance(pattern, str) or not pattern:
        raise FlagoptError(source, key, "a pattern must be a non-empty string (a Python regex)")
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise FlagoptError(source, key, f"invalid regex {pattern!r}: {exc}") from exc


def signatures_from_data(
    entries: Sequence[Mapping[str, Any]], source: str, key: str = "signatures"
) -> tuple[Signature, ...]:
    """Build signatures from YAML-shaped entries; raises :class:`FlagoptError` naming the bad entry.

    Example:
        >>> [s.failure_class for s in signatures_from_data([{"name": "gcs", "class": "crash",
        ...     "patterns": ["gcsfuse: .* failed"]}], "space.yaml")]
        ['crash']
    """
    if not isinstance(entries, Sequence) or isinstance(entries, str):
        raise FlagoptError(source, key, "must be a list of {name, class, patterns}")
    out = []
    for i, entry in enumerate(entries):
        where = f"{key}[{i}]"
        if not isinstance(entry, Mapping):
            raise FlagoptError(source, where, "must be a mapping with name, class and patterns")
        unknown = set(entry) - {"name", "class", "patterns", "requires_no_steps", "reason"}
        if unknown:
            raise FlagoptError(source, where, f"unknown keys {sorted(unknown)}; allowed: name, class, patterns, "
                               "requires_no_steps, reason")  # fmt: skip
        cls = entry.get("class")
        if cls not in FAILURE_CLASSES:
            raise FlagoptError(source, f"{where}.class", f"{cls!r} is not a failure class; use one of "
                               f"{', '.join(FAILURE_CLASSES)}")  # fmt: skip
        patterns = entry.get("patterns")
        if not isinstance(patterns, list) or not patterns:
            raise FlagoptError(source, f"{where}.patterns", "must be a non-empty list of regexes")
        out.append(
            Signature(
                name=str(entry.get("name") or f"{source}#{i}"),
                failure_class=cls,
                patterns=tuple(_compile(p, source, f"{where}.patterns[{j}]") for j, p in enumerate(patterns)),
                requires_no_steps=bool(entry.get("requires_no_steps", False)),
                reason=str(entry.get("reason") or ""),
            )
        )
    return tuple(out)


@cache
def load_signature_table() -> SignatureTable:
    """The shipped ``signatures.yaml``, parsed once."""
    source = "flagopt/failures/signatures.yaml"
    text = resources.files("flagopt.failures").joinpath("signatures.yaml").read_text(encoding="utf-8")
    data = yaml.safe_load(text)
    noise = tuple(_compile(item.get("pattern"), source, f"noise[{i}]") for i, item in enumerate(data["noise"]))
    return SignatureTable(
        signatures=signatures_from_data(data["signatures"], source),
        noise=noise,
        loss_pattern=_compile(data["loss_pattern"], source, "loss_pattern"),
    )
