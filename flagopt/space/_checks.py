"""Small typed readers for YAML mappings: each failure names the key path and the reason."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any, NoReturn

from flagopt.errors import SpaceError

ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
XLA_FLAG = re.compile(r"xla_[a-z0-9_]+\Z")
LIBTPU_FLAG = re.compile(r"(xla|tpu)_[a-z0-9_]+\Z")
ARG_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*\Z")
# Values end up in XLA_FLAGS, env vars, argv and the exported env.sh: refuse anything a shell or XLA's
# whitespace-split flag parser could misread.
UNSAFE_VALUE = re.compile(r"[\s'\"$`;|&<>\\]")


class Reader:
    """Reads one mapping of the space file, raising :class:`SpaceError` with ``file: key.path: reason``."""

    def __init__(self, source: str, data: Any, path: str = "") -> None:
        self.source = source
        self.path = path
        if not isinstance(data, Mapping):
            self.fail(f"must be a mapping, got {type_name(data)}")
        self.data = dict(data)

    def key(self, name: str) -> str:
        return f"{self.path}.{name}" if self.path else name

    def fail(self, reason: str, key: str | None = None) -> NoReturn:
        raise SpaceError(self.source, key if key is not None else (self.path or None), reason)

    def only(self, *allowed: str) -> None:
        for name in self.data:
            if name not in allowed:
                self.fail(f"unknown key (allowed: {', '.join(allowed)})", self.key(str(name)))

    def sub(self, name: str, default: Any = None) -> Reader:
        value = self.data.get(name, {} if default is None else default)
        return Reader(self.source, {} if value is None else value, self.key(name))

    def get(self, name: str, kind: type | tuple[type, ...], default: Any = None, *, required: bool = False) -> Any:
        if name not in self.data or self.data[name] is None:
            if required:
                self.fail("is required", self.key(name))
            return default
        value = self.data[name]
        kinds = kind if isinstance(kind, tuple) else (kind,)
        if bool in kinds or not isinstance(value, bool):
            if isinstance(value, kinds):
                return value
        if float in kinds and isinstance(value, int) and not isinstance(value, bool):
            return float(value)
        self.fail(f"must be {' or '.join(k.__name__ for k in kinds)}, got {type_name(value)}", self.key(name))

    def number(self, name: str, default: float | None = None, *, low: float | None = None,
               high: float | None = None, required: bool = False) -> float | None:
        value = self.get(name, (int, float), default, required=required)
        if value is None:
            return None
        if not math.isfinite(value):
            self.fail(f"must be a finite number, got {value}", self.key(name))
        if low is not None and value < low:
            self.fail(f"must be >= {low}, got {value}", self.key(name))
        if high is not None and value > high:
            self.fail(f"must be <= {high}, got {value}", self.key(name))
        return value


#: the largest integer a space may hold: XLA flags and Slurm settings are 64-bit at most, and a larger integer cannot
#: become a float (Optuna's distributions, the statistics) without an ``OverflowError``
MAX_INT = 2**63 - 1


def choice(r: Reader, name: str, allowed: tuple[str, ...], default: str) -> Any:
    """The string at ``name`` (``default`` if absent), which must be one of ``allowed``."""
    value = r.get(name, str, default)
    if value not in allowed:
        r.fail(f"must be one of {', '.join(allowed)}, got {value!r}", r.key(name))
    return value


def check_tree(source: str, data: Any, path: str = "") -> None:
    """Every key and value of the parsed file, before any is read: no NUL character (the OS refuses it in an
    argv, an environment variable or a path, so every run would fail) and no integer beyond 64 bits."""
    if isinstance(data, Mapping):
        for key, value in data.items():
            where = f"{path}.{key}" if path else str(key)
            check_tree(source, key, where)
            check_tree(source, value, where)
    elif isinstance(data, list):
        for i, value in enumerate(data):
            check_tree(source, value, f"{path}[{i}]")
    elif isinstance(data, str) and "\0" in data:
        raise SpaceError(source, path or None, f"must not contain a NUL character, got {data!r}")
    elif isinstance(data, int) and not isinstance(data, bool) and abs(data) > MAX_INT:
        raise SpaceError(source, path or None, f"must be within +-(2**63 - 1), got an integer of {len(str(abs(data)))} "
                                               "digits")


def type_name(value: Any) -> str:
    if value is None:
        return "null"
    return {dict: "mapping", list: "list", str: "string", bool: "boolean", int: "integer", float: "number"}.get(
        type(value), type(value).__name__
    )


def check_value(source: str, key: str, value: Any) -> None:
    if isinstance(value, bool) or isinstance(value, int):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise SpaceError(source, key, f"must be a finite number, got {value}")
        return
    if not isinstance(value, str):
        raise SpaceError(source, key, f"must be a scalar (string, number or boolean), got {type_name(value)}")
    if value == "":
        raise SpaceError(source, key, "must not be empty")
    bad = UNSAFE_VALUE.search(value)
    if bad:
        raise SpaceError(source, key, f"value {value!r} contains {bad.group()!r}: whitespace, quotes, $, backticks, "
                                      "backslashes, ;, |, &, <, > and newlines are not allowed")


def check_name(source: str, key: str, name: Any, target: str) -> str:
    pattern = {"xla": XLA_FLAG, "libtpu": LIBTPU_FLAG, "env": ENV_NAME, "arg": ARG_NAME}[target]
    what = {"xla": "an XLA flag name matching xla_[a-z0-9_]+ (no leading dashes)",
            "libtpu": "a libtpu flag name matching xla_... or tpu_... (no leading dashes)",
            "env": "an environment variable name matching [A-Za-z_][A-Za-z0-9_]*",
            "arg": "a workload argument name matching [A-Za-z_][A-Za-z0-9_.-]*"}[target]
    if not isinstance(name, str) or not pattern.match(name):
        raise SpaceError(source, key, f"{name!r} is not {what}")
    if target == "env" and name in ("XLA_FLAGS", "LIBTPU_INIT_ARGS"):
        raise SpaceError(source, key, f"{name} is assembled by flagopt; use an `xla:`/`libtpu:` target instead")
    return name


def render_value(value: Any) -> str:
    """How a value is written into a flag, an env var or a ``key=value`` argument."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
