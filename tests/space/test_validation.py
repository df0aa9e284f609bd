"""Every validation error of the space file: one line naming file, key path and reason; exit 2; nothing written."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from flagopt.cli import main
from flagopt.errors import SpaceError
from flagopt.space import load_space

VALID = """
name: t
command: ["python3", "-c", "pass"]
baseline:
  xla_flags: "--xla_gpu_enable_latency_hiding_scheduler=true"
  env: {NCCL_PROTO: Simple}
params:
  ag:
    xla: xla_gpu_all_gather_combine_threshold_bytes
    type: int
    low: 268435456
    high: 8589934592
    log: true
  proto:
    env: NCCL_PROTO
    choices: [Simple, LL, LL128]
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "space.yaml"
    path.write_text(textwrap.dedent(text))
    return path


def error_of(tmp_path: Path, text: str) -> SpaceError:
    with pytest.raises(SpaceError) as info:
        load_space(write(tmp_path, text))
    return info.value


def test_valid_space_loads(tmp_path):
    space = load_space(write(tmp_path, VALID))
    assert space.name == "t"
    assert [p.name for p in space.params] == ["ag", "proto"]
    assert space.params[0].log and space.params[0].type == "int"
    assert space.baseline.xla_flags == ("--xla_gpu_enable_latency_hiding_scheduler=true",)


def test_name_defaults_to_file_stem(tmp_path):
    path = tmp_path / "llama-pp8.yaml"
    path.write_text("command: python3 -c pass\n")
    space = load_space(path)
    assert space.name == "llama-pp8"
    assert space.command == ("python3", "-c", "pass")


CASES = [
    ("unknown top-level key", VALID + "bogus: 1\n", "bogus", "unknown key"),
    ("unknown param key", VALID + "  x:\n    xla: xla_a\n    choices: [1]\n    colour: red\n", "params.x.colour", "unknown key"),
    ("wrong type", VALID.replace("name: t", "name: t\ntimeout_min: soon"), "timeout_min", "must be"),
    ("low > high", VALID.replace("low: 268435456", "low: 9999999999"), "params.ag.low", "must be <= high"),
    ("log with low <= 0", VALID.replace("low: 268435456", "low: 0"), "params.ag.low", "> 0 when log"),
    ("empty choices", VALID.replace("choices: [Simple, LL, LL128]", "choices: []"), "params.proto.choices", "must not be empty"),
    ("two targets", VALID.replace("    env: NCCL_PROTO\n", "    env: NCCL_PROTO\n    xla: xla_a\n"), "params.proto", "exactly one target"),
    ("no target", VALID.replace("    env: NCCL_PROTO\n", ""), "params.proto", "exactly one target"),
    ("bad env name", VALID.replace("env: NCCL_PROTO", "env: 1NCCL"), "params.proto.env", "environment variable name"),
    ("bad flag name", VALID.replace("xla: xla_gpu_all_gather_combine_threshold_bytes", "xla: --xla_gpu_x"), "params.ag.xla", "xla_[a-z0-9_]+"),
    ("upper-case flag", VALID.replace("xla: xla_gpu_all_gather_combine_threshold_bytes", "xla: XLA_GPU"), "params.ag.xla", "XLA flag name"),
    ("value with space", VALID.replace("[Simple, LL, LL128]", "['Simple LL']"), "params.proto.choices[0]", "whitespace"),
    ("value with quote", VALID.replace("[Simple, LL, LL128]", "[\"a'b\"]"), "params.proto.choices[0]", "quotes"),
    ("value with dollar", VALID.replace("[Simple, LL, LL128]", "['$HOME']"), "params.proto.choices[0]", "'$'"),
    ("value with backtick", VALID.replace("[Simple, LL, LL128]", "['`id`']"), "params.proto.choices[0]", "'`'"),
    ("value with semicolon", VALID.replace("{NCCL_PROTO: Simple}", "{NCCL_PROTO: 'a;b'}"), "baseline.env.NCCL_PROTO", "';'"),
    ("value with pipe", VALID.replace("{NCCL_PROTO: Simple}", "{NCCL_PROTO: 'a|b'}"), "baseline.env.NCCL_PROTO", "'|'"),
    ("value with ampersand", VALID.replace("{NCCL_PROTO: Simple}", "{NCCL_PROTO: 'a&b'}"), "baseline.env.NCCL_PROTO", "'&'"),
    ("value with <", VALID.replace("{NCCL_PROTO: Simple}", "{NCCL_PROTO: 'a<b'}"), "baseline.env.NCCL_PROTO", "'<'"),
    ("value with >", VALID.replace("{NCCL_PROTO: Simple}", "{NCCL_PROTO: 'a>b'}"), "baseline.env.NCCL_PROTO", "'>'"),
    ("value with newline", VALID.replace("{NCCL_PROTO: Simple}", "{NCCL_PROTO: \"a\\nb\"}"), "baseline.env.NCCL_PROTO", "whitespace"),
    ("baseline flag token", VALID.replace("--xla_gpu_enable_latency_hiding_scheduler=true", "-xla_bad"), "baseline.xla_flags", "not a flag"),
    ("missing command", "name: t\n", "command", "is required"),
    ("libtpu name", VALID + "  t:\n    libtpu: foo_bar\n    choices: [1]\n", "params.t.libtpu", "xla_... or tpu_"),
    ("XLA_FLAGS as env", VALID + "  t:\n    env: XLA_FLAGS\n    choices: [1]\n", "params.t.env", "xla:"),
    ("choices and range", VALID + "  t:\n    xla: xla_a\n    choices: [1]\n    low: 1\n", "params.t.low", "two domains"),
    ("no domain", VALID + "  t:\n    xla: xla_a\n", "params.t", "needs a domain"),
    ("bad window", VALID + "metric: {window: [14, 9]}\n", "metric.window", "first step"),
    ("regex without groups", VALID + "metric: {format: regex, regex: 'x(\\\\d+)'}\n", "metric.regex", "named groups"),
    ("bad executor kind", VALID + "executor: {kind: k8s}\n", "executor.kind", "one of local, slurm"),
    ("profile sets nothing", VALID + "profiles:\n  p: {}\n", "profiles.p", "sets nothing"),
    ("profile unknown param", VALID + "profiles:\n  p: {params: {zz: 1}}\n", "profiles.p.params.zz", "unknown param"),
]


@pytest.mark.parametrize("label,text,key,reason", CASES, ids=[c[0] for c in CASES])
def test_validation_errors_name_file_key_and_reason(tmp_path, label, text, key, reason):
    error = error_of(tmp_path, text)
    assert error.source.endswith("space.yaml")
    assert error.key == key, error.message
    assert reason in error.reason, error.message
    assert "\n" not in error.message.strip()


def test_invalid_yaml_names_the_line(tmp_path):
    error = error_of(tmp_path, "name: [unclosed\n")
    assert "not valid YAML" in error.reason and "line" in error.reason


def test_cli_exit_2_one_line_and_nothing_written(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = write(tmp_path, VALID.replace("choices: [Simple, LL, LL128]", "choices: []"))
    storage = f"sqlite:///{tmp_path}/db/flagopt.db"
    assert main(["run", "--space", str(path), "--storage", storage]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert f"{path}: params.proto.choices: must not be empty" in err[0]
    assert not (tmp_path / "db").exists()
    assert not (tmp_path / "studies").exists()
    assert main(["validate", "--space", str(path)]) == 2


def test_env_file_is_parsed_without_a_shell(tmp_path):
    (tmp_path / "model.env.sh").write_text(
        "# deployed\nexport XLA_FLAGS=\"--xla_gpu_enable_pipelined_all_gather=true --xla_a=1\"\n"
        "export NCCL_NCHANNELS_PER_NET_PEER=8\nCUDA_DEVICE_MAX_CONNECTIONS='1'\n")
    space = load_space(write(tmp_path, VALID.replace("env: {NCCL_PROTO: Simple}",
                                                     "env: {NCCL_PROTO: Simple}\n  env_file: model.env.sh")))
    assert space.baseline.xla_flags[:2] == ("--xla_gpu_enable_pipelined_all_gather=true", "--xla_a=1")
    assert space.baseline.xla_flags[-1] == "--xla_gpu_enable_latency_hiding_scheduler=true"
    assert dict(space.baseline.env) == {"NCCL_NCHANNELS_PER_NET_PEER": "8", "CUDA_DEVICE_MAX_CONNECTIONS": "1",
                                        "NCCL_PROTO": "Simple"}


def test_env_file_refuses_expansions(tmp_path):
    (tmp_path / "e.sh").write_text("export XLA_FLAGS=\"$XLA_FLAGS --xla_a=1\"\n")
    error = error_of(tmp_path, VALID.replace("env: {NCCL_PROTO: Simple}", "env_file: e.sh"))
    assert error.source.endswith("e.sh:1") and "without a shell" in error.reason


def test_shipped_spaces_are_valid():
    root = Path(__file__).resolve().parents[2] / "search_spaces"
    files = sorted(root.glob("*.yaml"))
    assert files
    for path in files:
        assert load_space(path).command


def test_a_param_states_its_implicit_default(tmp_path):
    """`default:` says what the job has when the param sets nothing (XLA's default), so the screen need not
    re-probe it; a default of the wrong type is one error naming the key."""
    text = """
        name: d
        command: ["python3"]
        params:
          eigen: {xla: xla_cpu_multi_thread_eigen, choices: [true, false], default: true}
          ag: {xla: xla_gpu_all_gather_combine_threshold_bytes, type: int, low: 1024, high: 4096, default: 2048}
          proto: {env: NCCL_PROTO, choices: [Simple, LL]}
    """
    by_name = {p.name: p for p in load_space(write(tmp_path, text)).params}
    assert by_name["eigen"].default is True and by_name["ag"].default == 2048 and by_name["proto"].default is None
    err = error_of(tmp_path, text.replace("default: true}", "default: yes-please}"))
    assert err.key == "params.eigen.default" and "true/false" in err.reason
    err = error_of(tmp_path, text.replace("default: 2048}", "default: 20.5}"))
    assert err.key == "params.ag.default" and "a number" in err.reason
