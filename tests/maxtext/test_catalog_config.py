"""Every shipped MaxText space passes MaxText's own config loader: command, baseline.args, each arg param value,
each profile's and cross-config's args. No training: ``pyconfig.initialize`` only, as the trainer calls it first.

A source-checkout command (``MaxText/configs/base.yml``) is checked against the packaged base.yml of MaxText 0.2.5
(the same file at that version); a key that exists only in an older checkout would be reported here. MaxText checks
batch and mesh sizes against the devices it sees, so each space is loaded on as many fake CPU devices as its job
spans (``--xla_force_host_platform_device_count``), and a multi-node one with ``num_slices`` = its nodes.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from flagopt.render import render
from flagopt.space import Space, TrialConfig, load_space

pytestmark = pytest.mark.maxtext

CATALOG = Path(__file__).resolve().parents[2] / "search_spaces"
PROBE = Path(__file__).with_name("maxtext_config_probe.py")
PACKAGED_BASE = "src/maxtext/configs/base.yml"  # MaxText resolves this inside the installed package


def runs_maxtext(space: Space) -> bool:
    return any(word in ("MaxText.train", "maxtext.trainers.pre_train.train") for word in space.command)


MAXTEXT_SPACES = sorted(p.name for p in CATALOG.glob("*.yaml") if runs_maxtext(load_space(p)))


def maxtext_argv(space: Space, argv: tuple[str, ...]) -> list[str]:
    """The config file and the ``key=value`` overrides MaxText gets from a rendered command.

    MaxText derives ``num_slices`` from the devices it sees (one here) and refuses ``dcn_*`` parallelism on one
    slice, so a multi-node space gets ``num_slices=<nodes>`` appended: the topology it runs on, not a key it sets.
    """
    at = next(i for i, word in enumerate(argv) if word.endswith((".yml", ".yaml")))
    config = argv[at]
    local = space.workdir.resolve() / config
    config = str(local) if local.is_file() else PACKAGED_BASE
    overrides = [word for word in argv[at + 1:] if "=" in word]
    if space.executor.kind == "slurm" and space.executor.slurm.nodes > 1:
        overrides.append(f"num_slices={space.executor.slurm.nodes}")
    return [config, *overrides]


def arg_values(space: Space) -> list[tuple[str, Any]]:
    out = []
    for p in space.params:
        if p.target == "arg":
            values = p.choices if p.choices is not None else (p.low, p.high)
            out += [(p.key, int(v) if p.type == "int" else v) for v in values]
    return out


def cases_of(space: Space) -> list[tuple[str, TrialConfig]]:
    cases = [("command + baseline.args", TrialConfig("baseline-deployed", "baseline-deployed"))]
    cases += [(f"param {key}={value}", TrialConfig("sampled", "sampled", args=((key, value),)))
              for key, value in arg_values(space)]
    cases += [(f"profile {p.profile}", p) for p in space.profiles if p.args]
    cases += [(f"config {name}", TrialConfig("cross-config", name, args=tuple(args))) for name, args in space.configs]
    return cases


def devices_of(space: Space) -> int:
    """The devices the job spans: MaxText checks batch and mesh sizes against the device count it sees."""
    slurm = space.executor.slurm
    if space.executor.kind == "slurm":
        return slurm.nodes * (slurm.gpus_per_node or slurm.tasks_per_node)
    return 1


def probe(python: Path, spaces: dict[str, Space]) -> dict[tuple[str, str], dict[str, Any]]:
    """Run the config probe once per device count, on that many fake CPU devices."""
    verdicts: dict[tuple[str, str], dict[str, Any]] = {}
    for devices in sorted({devices_of(s) for s in spaces.values()}):
        cases = [{"label": f"{name}\t{label}", "argv": maxtext_argv(s, render(s, config, inherited={}).argv)}
                 for name, s in spaces.items() if devices_of(s) == devices for label, config in cases_of(s)]
        env = {**os.environ, "JAX_PLATFORMS": "cpu", "XLA_FLAGS": f"--xla_force_host_platform_device_count={devices}"}
        done = subprocess.run([str(python), str(PROBE)], input=json.dumps({"cases": cases}), capture_output=True,
                              text=True, timeout=600, check=False, env=env)
        line = next((ln for ln in done.stdout.splitlines() if ln.startswith("FLAGOPT_CASES ")), None)
        assert line is not None, f"the config probe failed (exit {done.returncode}): {done.stderr[-3000:]}"
        verdicts.update({tuple(r["label"].split("\t", 1)): r for r in json.loads(line.removeprefix("FLAGOPT_CASES "))})
    return verdicts


@pytest.fixture(scope="module")
def verdicts(maxtext_python) -> dict[tuple[str, str], dict[str, Any]]:
    return probe(maxtext_python, {name: load_space(CATALOG / name) for name in MAXTEXT_SPACES})


def test_the_catalog_has_maxtext_spaces_in_both_command_forms():
    commands = {load_space(CATALOG / name).command[2] for name in MAXTEXT_SPACES}
    assert {"MaxText.train", "maxtext.trainers.pre_train.train"} <= commands
    assert {"fsdp.yaml", "pp.yaml", "tp.yaml", "tpu.yaml", "maxtext_cpu.yaml"} <= set(MAXTEXT_SPACES)


@pytest.mark.parametrize("name", MAXTEXT_SPACES)
def test_maxtexts_config_loader_accepts_every_override_the_space_can_render(name, verdicts):
    mine = {label: v for (space, label), v in verdicts.items() if space == name}
    assert "command + baseline.args" in mine
    assert len(mine) == len(cases_of(load_space(CATALOG / name)))
    rejected = {label: v["error"] for label, v in mine.items() if not v["ok"]}
    assert not rejected, f"{name}: MaxText 0.2.5's config rejects {rejected}"


def test_the_check_catches_a_typo_in_a_key_and_a_value_maxtext_rejects(maxtext_python, tmp_path):
    text = (CATALOG / "fsdp.yaml").read_text()
    (tmp_path / "configs").mkdir()
    env_file = CATALOG / "configs" / "maxtext-gpu-h100.env.sh"
    (tmp_path / "configs" / env_file.name).write_text(env_file.read_text())
    text = text.replace("params:\n", "params:\n  typo: {arg: per_device_batch_sizee, choices: [2]}\n"
                        "  words: {arg: per_device_batch_size, choices: [two]}\n", 1)
    (tmp_path / "fsdp.yaml").write_text(text)
    found = probe(maxtext_python, {"fsdp": load_space(tmp_path / "fsdp.yaml")})
    assert found[("fsdp", "command + baseline.args")]["ok"]
    typo = found[("fsdp", "param per_device_batch_sizee=2")]
    assert not typo["ok"] and "'per_device_batch_sizee' not in" in typo["error"]
    words = found[("fsdp", "param per_device_batch_size=two")]
    assert not words["ok"] and "per_device_batch_size" in words["error"] and "valid integer" in words["error"]
