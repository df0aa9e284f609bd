"""Read a search-space YAML file into a validated :class:`Space`, or fail with one precise error."""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import yaml

from flagopt.errors import SpaceError
from flagopt.space._checks import (
    XLA_FLAG, LIBTPU_FLAG, Reader, check_name, check_tree, check_value, choice, type_name,
)
from flagopt.space._files import UniqueKeyLoader, read_env_file, read_text
from flagopt.space._sections import (
    executor_section, export_section, failures_section, noise_section, numerics_section, stop_section,
)
from flagopt.space._model import Baseline, Metric, Space
from flagopt.space._params import assignments, configs_section, params_section, profiles_section

TOP_KEYS = ("name", "model_tag", "parallelism", "command", "workdir", "timeout_min", "metric", "baseline", "params",
            "profiles", "executor", "stop", "noise", "failures", "numerics", "export", "configs", "evidence",
            "sampler", "seed", "screen")
_FLAG_TOKEN = re.compile(r"--([A-Za-z0-9_]+)(?:=(.*))?\Z")


def load_space(path: str | Path) -> Space:
    """Load and validate a space file.

    Raises:
        SpaceError: naming the file, the key path and the reason, for the first problem found.

    Example:
        >>> import pathlib, tempfile
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "demo.yaml"
        >>> _ = path.write_text("{command: [python, -c, pass], "
        ...                     "params: {pipe: {xla: xla_gpu_enable_pipelined_all_gather, choices: [true]}}}")
        >>> space = load_space(path)
        >>> space.name, [p.key for p in space.params]
        ('demo', ['xla_gpu_enable_pipelined_all_gather'])
    """
    path = Path(path)
    source = str(path)
    text = read_text(path, source, None)
    try:
        data = yaml.load(text, Loader=UniqueKeyLoader)  # noqa: S506 (a SafeLoader that also refuses duplicate keys)
        check_tree(source, data)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        raise SpaceError(source, None, f"not valid YAML{where}: {getattr(exc, 'problem', None) or exc}") from None
    except RecursionError:
        raise SpaceError(source, None, "not a search space: nested too deeply for YAML to read") from None
    if data is None:
        raise SpaceError(source, None, "the file is empty")
    top = Reader(source, data)
    top.only(*TOP_KEYS)
    return _build(top, path)


#: the steady-state window's limits (a tuning run is tens to thousands of steps)
MAX_STEP = 10**9
MAX_WINDOW = 100_000
#: A study name is also a folder name and part of file names: keep it well under any file system's limit.
MAX_NAME = 100


def _build(top: Reader, path: Path) -> Space:
    name = top.get("name", str, path.stem)
    if not re.match(r"[A-Za-z0-9][A-Za-z0-9_.=+-]*\Z", name):
        top.fail("must be letters, digits and _ . = + - (it names the study and its folder)", "name")
    for key, value in (("name", name), ("model_tag", top.get("model_tag", str, name))):
        if len(value) > MAX_NAME:
            top.fail(f"is {len(value)} characters long; at most {MAX_NAME} (it names the study's folder and files)", key)
    params = params_section(top.sub("params"))
    executor = executor_section(top.sub("executor"))
    space = Space(
        source=path.resolve(),
        name=name,
        model_tag=top.get("model_tag", str, name),
        parallelism=top.get("parallelism", str, ""),
        command=_command(top),
        workdir=_workdir(top, executor.kind == "local"),
        timeout_min=top.number("timeout_min", 45.0, low=0.01),
        metric=_metric(top.sub("metric")),
        baseline=_baseline(top.sub("baseline"), path),
        params=params,
        profiles=profiles_section(top.sub("profiles"), params),
        executor=executor,
        stop=stop_section(top.sub("stop")),
        noise=noise_section(top.sub("noise")),
        failures=failures_section(top.sub("failures")),
        numerics=numerics_section(top.sub("numerics")),
        export=export_section(top.sub("export")),
        configs=configs_section(top.sub("configs")),
        evidence=top.get("evidence", bool, False),
        screen=top.get("screen", bool, True),
        sampler=choice(top, "sampler", ("tpe", "gp", "random"), "tpe"),
        seed=_seed(top),
        raw=dict(top.data),
    )
    if space.stop.max_trials is not None and space.baseline.has_deployed_env and space.stop.max_trials < 2:
        # the planner runs baseline-deployed and baseline-no-env first: a budget of 1 would silently become 2
        top.fail(f"{space.stop.max_trials} cannot hold the two baselines a study with a deployed env runs first "
                 "(baseline-deployed, baseline-no-env): at least 2", "stop.max_trials")
    return space


def _workdir(top: Reader, local: bool) -> Path:
    """The folder the command runs in (relative: to the folder flagopt starts in). For the local executor it must
    exist now, or every run would crash on its first line; a Slurm job's folder is on the nodes, which this host may
    not see (``run --executor local`` checks it then: :func:`check_workdir`)."""
    workdir = Path(_no_nul(top, "workdir", top.get("workdir", str, "."))).expanduser()
    if local:
        check_workdir(top.source, workdir)
    return workdir


def check_workdir(source: str, workdir: Path) -> None:
    """A local run's ``workdir`` exists and is a folder, or one :class:`SpaceError`."""
    if not workdir.is_dir():
        raise SpaceError(source, "workdir", f"{workdir.resolve()} is not a folder" if workdir.exists() else
                         f"{workdir.resolve()} does not exist (a relative workdir is taken from the folder flagopt "
                         "runs in)")


def _no_nul(r: Reader, key: str, value: str) -> str:
    if "\0" in value:
        r.fail("must not contain a NUL character", key)
    return value


def _seed(top: Reader) -> int | None:
    seed = top.get("seed", int)
    if seed is not None and not 0 <= seed < 2**32:
        top.fail(f"must be between 0 and 2**32 - 1 (a sampler seed), got {seed}", "seed")
    return seed


def _command(top: Reader) -> tuple[str, ...]:
    raw = top.get("command", (list, str), required=True)
    if isinstance(raw, str):
        try:
            argv = shlex.split(raw)
        except ValueError as exc:
            top.fail(f"cannot be split into arguments: {exc}", "command")
    else:
        argv = raw
        for i, item in enumerate(argv):
            if isinstance(item, bool) or not isinstance(item, (str, int, float)):
                top.fail(f"must be a string, got {type_name(item)}", f"command[{i}]")
        argv = [str(a) for a in argv]
    if not argv:
        top.fail("must not be empty", "command")
    for i, item in enumerate(argv):
        _no_nul(top, f"command[{i}]", item)
    return tuple(argv)


def _metric(r: Reader) -> Metric:
    r.only("format", "field", "window", "direction", "regex", "pattern", "tokens_per_step")
    pattern = r.get("regex", str) or r.get("pattern", str)
    fmt = choice(r, "format", ("maxtext", "regex"), "regex" if pattern else "maxtext")
    if fmt == "regex":
        if not pattern:
            r.fail("format: regex needs `regex:` with named groups (?P<step>...) and (?P<value>...)", r.key("regex"))
        try:
            groups = re.compile(pattern).groupindex
        except (re.error, RecursionError, OverflowError) as exc:
            r.fail(f"not a valid regular expression: {exc}", r.key("regex"))
        missing = {"step", "value"} - set(groups)
        if missing:
            r.fail(f"needs named groups {', '.join(sorted(missing))}", r.key("regex"))
    window = r.get("window", list, [9, 14])
    if len(window) != 2 or not all(isinstance(w, int) and not isinstance(w, bool) for w in window):
        r.fail("must be two integers [first, last]", r.key("window"))
    if window[0] < 0 or window[0] > window[1]:
        r.fail(f"first step must be >= 0 and <= last step, got {window}", r.key("window"))
    if window[1] > MAX_STEP or window[1] - window[0] + 1 > MAX_WINDOW:
        # the driver and the log parser hold one entry per window step: a window of 10**20 steps is a typo
        r.fail(f"at most {MAX_WINDOW:,} steps, the last at most {MAX_STEP:,}; got {window}", r.key("window"))
    return Metric(format=fmt, field=r.get("field", str, "Tokens/s/device"), pattern=pattern,
                  window=(window[0], window[1]), direction=choice(r, "direction", ("maximize", "minimize"), "maximize"),
                  tokens_per_step=r.number("tokens_per_step", None, low=0))


def parse_flag_tokens(source: str, key: str, raw: Any, target: str = "xla") -> tuple[str, ...]:
    """Split ``--a=1 --b`` (a string or a list) into validated tokens."""
    if isinstance(raw, str):
        tokens = raw.split()
    elif isinstance(raw, list):
        tokens = []
        for i, item in enumerate(raw):
            if not isinstance(item, str):
                raise SpaceError(source, f"{key}[{i}]", f"must be a string, got {type_name(item)}")
            tokens.extend(item.split())
    else:
        raise SpaceError(source, key, f"must be a string or a list of strings, got {type_name(raw)}")
    pattern = XLA_FLAG if target == "xla" else LIBTPU_FLAG
    for token in tokens:
        match = _FLAG_TOKEN.match(token)
        if not match or not pattern.match(match.group(1)):
            raise SpaceError(source, key, f"{token!r} is not a flag of the form --{'xla' if target == 'xla' else 'xla|tpu'}_name=value")
        if match.group(2) is not None and match.group(2) != "":
            check_value(source, key, match.group(2))
    return tuple(tokens)


def _baseline(r: Reader, space_path: Path) -> Baseline:
    r.only("xla_flags", "libtpu_flags", "env", "env_file", "args", "defaults")
    xla: list[str] = []
    libtpu: list[str] = []
    env: dict[str, str] = {}
    env_file = r.get("env_file", str)
    if env_file:
        file_path = (space_path.parent / env_file).expanduser()
        for name, value, line_no in read_env_file(file_path, r.source, r.key("env_file")):
            where = f"{file_path}:{line_no}"
            if name == "XLA_FLAGS":
                xla.extend(parse_flag_tokens(where, name, value, "xla"))
            elif name == "LIBTPU_INIT_ARGS":
                libtpu.extend(parse_flag_tokens(where, name, value, "libtpu"))
            else:
                check_value(where, name, value)
                env[name] = value
    if "xla_flags" in r.data:
        xla.extend(parse_flag_tokens(r.source, r.key("xla_flags"), r.data["xla_flags"], "xla"))
    if "libtpu_flags" in r.data:
        libtpu.extend(parse_flag_tokens(r.source, r.key("libtpu_flags"), r.data["libtpu_flags"], "libtpu"))
    env_r = r.sub("env")
    for name, value in env_r.data.items():
        check_name(r.source, env_r.key(str(name)), name, "env")
        check_value(r.source, env_r.key(name), value)
        env[name] = str(value) if not isinstance(value, bool) else ("true" if value else "false")
    args = assignments(r.sub("args"), "arg")
    defaults_r = r.sub("defaults")
    defaults = []
    for name, value in defaults_r.data.items():
        target = "xla" if isinstance(name, str) and LIBTPU_FLAG.match(name) else "env"
        check_name(r.source, defaults_r.key(str(name)), name, target)
        check_value(r.source, defaults_r.key(name), value)
        defaults.append((name, value))
    return Baseline(xla_flags=tuple(xla), libtpu_flags=tuple(libtpu), env=tuple(env.items()), args=args,
                    defaults=tuple(defaults), env_file=env_file)
