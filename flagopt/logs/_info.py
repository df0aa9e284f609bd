"""Facts a training log states about itself: jax/jaxlib/NCCL versions, device count, model size, config.

The patterns are data (``run_info.yaml`` next to this module) so a new log line needs no code change.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

import yaml

from flagopt.logs._errors import LogParseError

_TABLE = "run_info.yaml"


@dataclass(frozen=True)
class InfoPattern:
    """One row of the table: ``key`` (may hold ``{name}``) and a compiled pattern with a ``value`` group."""

    key: str
    pattern: re.Pattern[str]


def run_info(text: str, patterns: tuple[InfoPattern, ...] | None = None) -> dict[str, str]:
    """The facts found in ``text``, first statement of each key winning (rank 0 speaks first in multi-host logs).

    Args:
        text: the log.
        patterns: the table to use; the packaged ``run_info.yaml`` by default (see :func:`load_info_patterns`).

    Example:
        >>> info = run_info("# System Information: Jax Version: 0.4.25\\nNum_devices: 8, shape (1, 8, 1)\\n")
        >>> info["jax_version"], info["num_devices"], info["mesh_shape"]
        ('0.4.25', '8', '(1, 8, 1)')
    """
    table = default_info_patterns() if patterns is None else patterns
    info: dict[str, str] = {}
    for row in table:
        if "{name}" not in row.key and row.key in info:
            continue
        for match in row.pattern.finditer(text):
            key = row.key.format(name=match.group("name")) if "{name}" in row.key else row.key
            info.setdefault(key, match.group("value"))
            if "{name}" not in row.key:
                break
    return info


def tokens_per_device_step(info: dict[str, str]) -> float | None:
    """``per_device_batch_size * max_target_length`` from MaxText's ``Config param`` lines, when both are there.

    This is the ``tokens_per_step`` that :func:`flagopt.logs.parse_steps` needs for logs without
    ``Tokens/s/device``.

    Example:
        >>> tokens_per_device_step({"config.per_device_batch_size": "12.0", "config.max_target_length": "2048"})
        24576.0
    """
    try:
        return float(info["config.per_device_batch_size"]) * float(info["config.max_target_length"])
    except (KeyError, ValueError):
        return None


def load_info_patterns(path: str | None = None) -> tuple[InfoPattern, ...]:
    """Read and check a run-info table (the packaged one when ``path`` is None).

    Raises:
        LogParseError: naming the file and the row that is not ``{key, pattern}`` with a ``value`` group.
    """
    if path is None:
        source = f"flagopt/logs/{_TABLE}"
        raw = resources.files("flagopt.logs").joinpath(_TABLE).read_text(encoding="utf-8")
    else:
        source = path
        with open(path, encoding="utf-8") as handle:
            raw = handle.read()
    rows = yaml.safe_load(raw)
    if not isinstance(rows, list):
        raise LogParseError(source, None, "must be a list of {key, pattern} entries")
    return tuple(_row(source, i, row) for i, row in enumerate(rows))


@lru_cache(maxsize=1)
def default_info_patterns() -> tuple[InfoPattern, ...]:
    """The packaged table, read once."""
    return load_info_patterns()


def _row(source: str, index: int, row: object) -> InfoPattern:
    where = f"[{index}]"
    if not isinstance(row, dict) or not isinstance(row.get("key"), str) or not isinstance(row.get("pattern"), str):
        raise LogParseError(source, where, "each entry needs a string 'key' and a string 'pattern'")
    try:
        pattern = re.compile(row["pattern"], re.MULTILINE)
    except re.error as exc:
        raise LogParseError(source, f"{where}.pattern", f"not a valid regular expression: {exc}") from exc
    needed = {"value", "name"} if "{name}" in row["key"] else {"value"}
    if not needed <= set(pattern.groupindex):
        groups = ", ".join(f"(?P<{g}>...)" for g in sorted(needed - set(pattern.groupindex)))
        raise LogParseError(source, f"{where}.pattern", f"add the named group(s) {groups}")
    return InfoPattern(row["key"], pattern)
