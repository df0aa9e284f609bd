"""Malformed and hostile space files: one FlagoptError naming file, key and reason, exit 2, nothing written.

The property test throws generated YAML (random structure at every key the loader reads, hostile scalars, binary
bytes) at ``load_space`` and ``flagopt validate``; the named cases are the defects found by hand (issue 16).
"""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings, strategies as st

from flagopt.cli import main
from flagopt.errors import FlagoptError, SpaceError
from flagopt.space import load_space

BASE = {"name": "t", "command": ["python3", "-c", "pass"],
        "params": {"proto": {"env": "NCCL_PROTO", "choices": ["Simple", "LL"]},
                   "ag": {"xla": "xla_gpu_all_gather_combine_threshold_bytes", "type": "int", "low": 1, "high": 8}}}


def write(tmp_path: Path, text: str | bytes, name: str = "space.yaml") -> Path:
    path = tmp_path / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(textwrap.dedent(text))
    return path


def refused(tmp_path: Path, text: str | bytes, capsys) -> str:
    """The one error line of ``flagopt validate`` on ``text``; asserts exit 2 and that nothing was written."""
    path = write(tmp_path, text)
    before = sorted(os.listdir(tmp_path))
    assert main(["validate", "--space", str(path)]) == 2
    assert sorted(os.listdir(tmp_path)) == before
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"flagopt: error: {path}") and "\n" not in err and "Traceback" not in err
    return err


def test_binary_space_file_is_one_error(tmp_path, capsys):
    err = refused(tmp_path, b"name: t\ncommand: [\xff\xfe\x00\x81]\n", capsys)
    assert "not a UTF-8 text file" in err


def test_binary_env_file_is_one_error(tmp_path, capsys):
    write(tmp_path, b"export A=\xff\n", "deployed.env")
    err = refused(tmp_path, "name: t\ncommand: [python3]\nbaseline: {env_file: deployed.env}\n", capsys)
    assert "baseline.env_file" in err and "deployed.env is not a UTF-8 text file" in err


def test_overlong_name_is_refused_before_any_folder_is_made(tmp_path, capsys):
    err = refused(tmp_path, f"name: {'n' * 5000}\ncommand: [python3]\n", capsys)
    assert ": name: is 5000 characters long; at most 100" in err


@pytest.mark.parametrize("bound,value", [("low", ".inf"), ("high", ".inf"), ("low", ".nan"), ("high", "-.inf")])
def test_non_finite_bounds_are_refused(tmp_path, capsys, bound, value):
    params = {"low": 1, "high": 8, bound: value}
    err = refused(tmp_path, f"""
        name: t
        command: [python3]
        params:
          x: {{arg: x, type: float, low: {params['low']}, high: {params['high']}}}
    """, capsys)
    assert f"params.x.{bound}: must be a finite number" in err


def test_non_finite_numbers_elsewhere_are_refused(tmp_path, capsys):
    assert "stop.max_null: must be a finite number" in refused(
        tmp_path, "name: t\ncommand: [python3]\nstop: {max_null: .inf}\n", capsys)
    assert "params.x.choices[1]: must be a finite number" in refused(
        tmp_path, "name: t\ncommand: [python3]\nparams: {x: {arg: x, choices: [1.0, .nan]}}\n", capsys)


def test_duplicate_keys_are_refused_not_last_wins(tmp_path, capsys):
    err = refused(tmp_path, """
        name: t
        command: [python3]
        params:
          a: {arg: a, choices: [1, 2]}
          a: {arg: b, choices: [3]}
    """, capsys)
    assert "duplicate key 'a' (first given on line 5)" in err and "line 6" in err
    assert "duplicate key 'name'" in refused(tmp_path, "name: t\ncommand: [python3]\nname: u\n", capsys)


def test_yaml_merge_keys_are_not_duplicates(tmp_path):
    space = load_space(write(tmp_path, """
        name: t
        command: [python3]
        params:
          a: &a {arg: a, choices: [1, 2]}
          b: {<<: *a, arg: b}
    """))
    assert [(p.name, p.key) for p in space.params] == [("a", "a"), ("b", "b")]


def test_deep_nesting_and_nul_are_refused(tmp_path, capsys):
    assert "nested too deeply" in refused(tmp_path, "name: t\ncommand: " + "[" * 5000 + "]" * 5000 + "\n", capsys)
    assert "command[1]: must not contain a NUL" in refused(tmp_path, 'name: t\ncommand: [python3, "a\\0b"]\n', capsys)


# -- property-based: whatever the file holds, the loader answers with a space or one FlagoptError ----------------
HOSTILE = ["", " ", "$(touch pwned)", "`id`", "a;b", "../../etc", "\u202e", "x" * 300, "--xla_a=1 --b", "\\",
           "'", '"', "~", "*", "&a", "!!python/object:os.system", "\t", "NaN", "1e400", "null"]
scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True, allow_infinity=True),
                    st.text(max_size=20), st.sampled_from(HOSTILE), st.dates())
values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                      st.dictionaries(st.one_of(st.text(max_size=8), st.integers()),
                                                                      inner, max_size=4)), max_leaves=12)
KEYS = ["name", "model_tag", "command", "workdir", "timeout_min", "metric", "baseline", "params", "profiles",
        "executor", "stop", "noise", "failures", "numerics", "export", "configs", "evidence", "sampler", "seed",
        "params.proto", "params.proto.choices", "params.ag.low", "params.ag.high", "params.ag.step", "params.ag.log",
        "params.ag.type", "metric.window", "metric.regex", "metric.format", "baseline.env", "baseline.xla_flags",
        "baseline.defaults", "baseline.env_file", "executor.slurm", "executor.slurm.nodes", "executor.slurm.additional",
        "failures.signatures", "noise.baseline_every", "profiles.p", "profiles.p.params", "configs.c.args", "unknown"]


def _put(doc: dict, dotted: str, value: object) -> dict:
    *parents, last = dotted.split(".")
    node = doc
    for part in parents:
        if not isinstance(node.get(part), dict):
            node[part] = {}
        node = node[part]
    node[last] = value
    return doc


def _document(edits: list[tuple[str, object]]) -> str:
    doc = yaml.safe_load(yaml.safe_dump(BASE))
    for key, value in edits:
        doc = _put(doc, key, value)
    return yaml.safe_dump(doc, allow_unicode=True)


documents = st.one_of(
    st.lists(st.tuples(st.sampled_from(KEYS), values), min_size=1, max_size=4).map(_document),
    values.map(lambda v: yaml.safe_dump(v, allow_unicode=True)),
    st.text(max_size=200),
    st.binary(max_size=200),
)


@settings(max_examples=200, deadline=None, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                   HealthCheck.too_slow])
@given(text=documents)
def test_any_file_loads_or_is_one_flagopt_error(tmp_path_factory, text):
    folder = tmp_path_factory.mktemp("prop")
    path = folder / "space.yaml"
    path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8", "surrogatepass"))
    try:
        load_space(path)
    except FlagoptError as exc:
        assert exc.source.startswith(str(path)) or exc.source.startswith(str(folder))
        assert main(["validate", "--space", str(path)]) == 2
    assert sorted(os.listdir(folder)) == ["space.yaml"]
