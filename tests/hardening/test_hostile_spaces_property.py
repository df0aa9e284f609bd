"""Issue 22: hypothesis throws generated hostile spaces (NUL bytes, numbers beyond 64 bits and floats, special files
as the space, env file or workdir) at ``validate`` and ``run``: each answers with one line or runs; no traceback,
and ``validate`` and ``run`` agree (what validate accepts, run does not refuse as a bad space)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flagopt.cli import main

BASE = {"name": "h", "command": ["true"], "stop": {"max_trials": 1},
        "params": {"proto": {"env": "NCCL_PROTO", "choices": ["Simple", "LL"]},
                   "ag": {"xla": "xla_gpu_all_gather_combine_threshold_bytes", "type": "int", "low": 1, "high": 8}}}

KEYS = ["name", "model_tag", "parallelism", "command", "workdir", "timeout_min", "metric.window", "metric.field",
        "baseline.env.NCCL_ALGO", "baseline.args.steps", "baseline.xla_flags", "baseline.env_file",
        "params.proto.choices", "params.ag.low", "params.ag.high", "executor.slurm.nodes", "executor.slurm.time",
        "executor.slurm.pending_deadline_min", "stop.max_trials", "stop.max_null", "noise.min_runs", "seed"]
#: paths flagopt must refuse or read safely: a FIFO, a device, a folder, a symlink to /dev/zero (made per example)
SPECIAL = ["@fifo", "/dev/zero", "/dev/null", "@dir", "@zero-link", "/proc/self/mem"]

hostile_text = st.one_of(
    st.text(min_size=1, max_size=8).map(lambda s: s + "\0"),
    st.just("a\0b"),
    st.sampled_from(SPECIAL),
    st.text(max_size=12),
)
huge = st.one_of(st.integers(min_value=2**62, max_value=10**30), st.integers(min_value=-10**30, max_value=-1),
                 st.just(10**400), st.just(-10**400), st.sampled_from([0, 1, 2**63, 2**64]),
                 st.floats(allow_nan=True, allow_infinity=True))
values = st.one_of(hostile_text, huge, st.lists(st.one_of(hostile_text, huge), min_size=1, max_size=3),
                   st.lists(st.integers(min_value=-1, max_value=10**21), min_size=2, max_size=2))


def _put(doc: dict, dotted: str, value: object) -> dict:
    *parents, last = dotted.split(".")
    node = doc
    for part in parents:
        if not isinstance(node.get(part), dict):
            node[part] = {}
        node = node[part]
    node[last] = value
    return doc


def _special(folder: Path, value: object) -> object:
    """Make the special file a value names, inside the example's folder."""
    if isinstance(value, list):
        return [_special(folder, v) for v in value]
    # One example may name the same special file twice (an edit and the space itself): make each once.
    if value == "@fifo":
        if not os.path.lexists(folder / "fifo"):
            os.mkfifo(folder / "fifo")
        return str(folder / "fifo")
    if value == "@dir":
        (folder / "dir").mkdir(exist_ok=True)
        return str(folder / "dir")
    if value == "@zero-link":
        if not os.path.lexists(folder / "zero"):
            (folder / "zero").symlink_to("/dev/zero")
        return str(folder / "zero")
    return value


def one_answer(argv: list[str], capsys) -> int:
    """``main(argv)`` returns a code (no exception escapes) and a failure says one line."""
    code = main(argv)
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err, err
    if code != 0:
        assert err.startswith("flagopt: error: ") and "\n" not in err.split("\n", 1)[0], err
    return code


@settings(max_examples=60, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(edits=st.lists(st.tuples(st.sampled_from(KEYS), values), min_size=1, max_size=3),
       as_special=st.sampled_from([None, None, None, "@fifo", "@zero-link", "@dir"]))
def test_hostile_spaces_get_one_line_from_validate_and_run(tmp_path_factory, capsys, monkeypatch, edits, as_special):
    folder = tmp_path_factory.mktemp("hostile")
    monkeypatch.chdir(folder)
    doc = yaml.safe_load(yaml.safe_dump(BASE))
    for key, value in edits:
        doc = _put(doc, key, _special(folder, value))
    text = yaml.safe_dump(doc, allow_unicode=True)
    path = folder / "space.yaml"
    if as_special is None:
        path.write_text(text)
    else:
        path = Path(str(_special(folder, as_special)))
    storage = f"sqlite:///{folder}/studies/flagopt.db"
    checked = one_answer(["validate", "--space", str(path)], capsys)
    ran = one_answer(["run", "--space", str(path), "--storage", storage, "--no-preflight", "--quiet",
                      "--executor", "local", "--trials", "1"], capsys)
    if checked != 0:
        assert ran == 2  # the same refusal, before anything runs
        assert not (folder / "studies").exists()


def test_a_space_that_is_a_fifo_does_not_hang_run(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    os.mkfifo(tmp_path / "space.yaml")
    assert one_answer(["run", "--space", str(tmp_path / "space.yaml"), "--no-preflight"], capsys) == 2


@pytest.fixture(autouse=True)
def _no_inherited_storage(monkeypatch):
    monkeypatch.delenv("FLAGOPT_STORAGE", raising=False)
    monkeypatch.delenv("FLAGOPT_ARTIFACTS", raising=False)


