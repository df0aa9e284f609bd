"""Reading the files a space names: its YAML text (bounded, regular files only, duplicate keys refused) and env
files (``export NAME=value``, read without a shell)."""

from __future__ import annotations

import os
import shlex
import stat
from pathlib import Path
from typing import Any

import yaml

from flagopt.errors import SpaceError
from flagopt.space._checks import check_name


#: a space or env file is a few KiB: a larger one is a mistake (a log, a device), refused before it is read
MAX_FILE_BYTES = 4 * 2**20


def read_text(path: Path, source: str, key: str | None) -> str:
    """The file's text; an unreadable, non-regular (a FIFO, a device), oversized or non-UTF-8 file is one
    :class:`SpaceError` (a FIFO would block the read forever, ``/dev/zero`` would never end)."""
    try:
        with open(path, "rb", opener=lambda p, flags: os.open(p, flags | os.O_NONBLOCK)) as f:
            info = os.fstat(f.fileno())
            if not stat.S_ISREG(info.st_mode):
                kind = "a folder" if stat.S_ISDIR(info.st_mode) else "not a regular file (a FIFO, a device or a socket)"
                raise SpaceError(source, key, f"{path} is {kind}" if key else f"is {kind}")
            data = f.read(MAX_FILE_BYTES + 1)
        if len(data) > MAX_FILE_BYTES:
            raise SpaceError(source, key, f"{path} is larger than {MAX_FILE_BYTES // 2**20} MiB: not a space or env file")
        text = data.decode("utf-8")
        if "\0" in text:
            raise SpaceError(source, key, f"{path} contains a NUL character (byte {text.index(chr(0))})")
        return text
    except OSError as exc:
        reason = f"cannot read {path}" if key else "cannot read the file"
        raise SpaceError(source, key, f"{reason}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise SpaceError(source, key, f"{path} is not a UTF-8 text file (byte {exc.start} is "
                                      f"{exc.object[exc.start:exc.start + 1]!r})") from None


class UniqueKeyLoader(yaml.SafeLoader):
    """PyYAML's safe loader, except that a key given twice in one mapping is an error (not "the last wins")."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        seen: dict[Any, Any] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                first = seen.get(key)
            except TypeError:
                continue  # an unhashable key: the base class says so
            if first is not None:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r} (first given on line {first.line + 1}); "
                                "keep one of them", key_node.start_mark)
            seen[key] = key_node.start_mark
        return super().construct_mapping(node, deep)


def read_env_file(path: Path, source: str, key: str) -> list[tuple[str, str, int]]:
    """Parse ``export NAME=value`` lines without a shell (quotes honoured, nothing expanded)."""
    lines = read_text(path, source, key).splitlines()
    out = []
    for no, line in enumerate(lines, 1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        try:
            words = shlex.split(stripped, comments=True)
        except ValueError as exc:
            raise SpaceError(f"{path}:{no}", None, f"cannot parse the line: {exc}") from None
        if words and words[0] == "export":
            words = words[1:]
        if len(words) != 1 or "=" not in words[0]:
            raise SpaceError(f"{path}:{no}", None, "expected `export NAME=value` (one assignment per line)")
        name, value = words[0].split("=", 1)
        check_name(f"{path}:{no}", name, name, "env") if name not in ("XLA_FLAGS", "LIBTPU_INIT_ARGS") else None
        if "$" in value or "`" in value:
            raise SpaceError(f"{path}:{no}", name, "flagopt reads env files without a shell, so $ and backticks "
                                                   "are not expanded: write the value literally")
        out.append((name, value, no))
    return out
