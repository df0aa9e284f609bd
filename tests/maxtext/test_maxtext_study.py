"""`flagopt run` drives real MaxText 0.2.5 on this machine's CPU: search_spaces/maxtext_cpu.yaml as shipped, with
the study cut to a few runs; and MaxText's own failures, classified as docs/failures.md says.

Each MaxText run takes ~15 s here (import and compile ~12 s), so these tests run a handful of them in all.
"""

from __future__ import annotations

import resource
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from flagopt.study import history, load_study

pytestmark = pytest.mark.maxtext

REPO = Path(__file__).resolve().parents[2]
SHIPPED = REPO / "search_spaces" / "maxtext_cpu.yaml"
WINDOW = list(range(9, 15))


def space_file(tmp_path: Path, maxtext_python: Path, name: str, **changes: Any) -> Path:
    """The shipped space with the study cut short; MaxText writes under tmp_path."""
    doc = yaml.safe_load(SHIPPED.read_text())
    doc["name"] = name
    doc["command"] = [str(maxtext_python) if i == 0 else
                      f"base_output_directory={tmp_path / 'maxtext-out'}" if word.startswith("base_output_directory=")
                      else word for i, word in enumerate(doc["command"])]
    doc.update(changes)
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def flagopt_run(space: Path, storage: str, *extra: str,
                address_space: int | None = None) -> subprocess.CompletedProcess:
    def limit() -> None:  # the OOM run asks for ~440 GiB: an address-space cap makes that fail on any host
        if address_space is not None:
            resource.setrlimit(resource.RLIMIT_AS, (address_space, address_space))

    return subprocess.run([sys.executable, "-m", "flagopt", "run", "--space", str(space), "--storage", storage, *extra],
                          cwd=REPO, capture_output=True, text=True, timeout=900, preexec_fn=limit, check=False)


def test_the_shipped_space_points_at_the_maxtext_venv_and_runs_the_packaged_trainer():
    doc = yaml.safe_load(SHIPPED.read_text())
    assert doc["command"][:4] == [".venv-maxtext/bin/python", "-m", "maxtext.trainers.pre_train.train",
                                  "src/maxtext/configs/base.yml"]
    assert doc["workdir"] == "." and doc["metric"]["window"] == [9, 14] and "steps=15" in doc["command"]
    targets = {next(k for k in ("xla", "env", "arg") if k in p) for p in doc["params"].values()}
    assert targets == {"xla", "env", "arg"}


def test_a_study_over_an_xla_flag_an_env_var_and_a_workload_arg(maxtext_python, tmp_path):
    space = space_file(tmp_path, maxtext_python, "mx-study",
                       profiles={"eigen_off": {"xla": {"xla_cpu_multi_thread_eigen": False}},
                                 "mem_fraction": {"env": {"XLA_PYTHON_CLIENT_MEM_FRACTION": "0.5"}},
                                 "batch_2": {"args": {"per_device_batch_size": 2}}},
                       noise={"max_repeats": 1, "baseline_every": 10}, stop={"max_trials": 4})
    storage = f"sqlite:///{tmp_path}/studies/flagopt.db"
    done = flagopt_run(space, storage)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    # Pre-flight asked MaxText's interpreter, whose jax is not flagopt's.
    assert f"pre-flight against jax 0.12.0.1 / jaxlib 0.12.0.1 ({maxtext_python})" in done.stdout

    records = history(load_study(storage, "mx-study"))
    # Nothing deployed: no baseline-no-env run (it would be baseline-deployed again).
    assert [r.profile for r in records] == ["baseline-deployed", "eigen_off", "mem_fraction", "batch_2"]
    for rec in records:
        attrs = rec.attrs
        assert rec.status == "ok", (rec.profile, attrs.get("failure_reason"))
        assert [step for step, _ in attrs["steps"]] == list(range(15)), rec.profile
        assert len(attrs["window_values"]) == 6 and attrs["steady"] > 0
        assert attrs["window_values"] == pytest.approx([v for step, v in attrs["steps"] if step in WINDOW])
        assert attrs["steady"] == pytest.approx(sum(attrs["window_values"]) / 6)
        assert attrs["run_info"]["jax_version"] == "0.12.0.1", attrs["run_info"]
        assert isinstance(attrs["final_loss"], float) and 5 < attrs["final_loss"] < 8  # ln(1024) = 6.9 at start
        assert attrs["argv"][0] == str(maxtext_python) and attrs["exit_code"] == 0
        assert Path(attrs["log_path"]).is_file() and attrs["gain"] is not None and attrs["host"]
    by = {r.profile: r.attrs for r in records}
    assert "--xla_cpu_multi_thread_eigen=false" in by["eigen_off"]["xla_flags"].split()
    assert not (by["baseline-deployed"]["xla_flags"] or "").count("xla_cpu_multi_thread_eigen")
    assert by["mem_fraction"]["env"]["XLA_PYTHON_CLIENT_MEM_FRACTION"] == "0.5"
    assert "per_device_batch_size=2" in by["batch_2"]["argv"] and "per_device_batch_size=1" in by["eigen_off"]["argv"]
    # MaxText's own total_weights: twice the tokens per step with twice the batch.
    log = Path(by["batch_2"]["log_path"]).read_text()
    assert "total_weights: 256" in log and "total_weights: 128" in Path(by["eigen_off"]["log_path"]).read_text()
    # The shipped numerics tolerance flags the batch change (its loss curve moves) and not the XLA flag or env var.
    assert "differs from the baseline's" in by["batch_2"]["numerics_flag"]
    assert not any("numerics_flag" in by[p] for p in ("eigen_off", "mem_fraction", "baseline-deployed"))


def test_maxtexts_failures_are_classified_with_maxtexts_own_messages(maxtext_python, tmp_path):
    space = space_file(tmp_path, maxtext_python, "mx-failures",
                       profiles={"unknown_flag": {"xla": {"xla_flagopt_no_such_flag": True}},
                                 "key_typo": {"args": {"per_device_batch_sizee": 2}},
                                 "oom": {"args": {"per_device_batch_size": 4096, "max_target_length": 2048}}},
                       # An invalid run (the unknown flag) uses no budget: 3 runs are the baseline, the typo, the OOM.
                       noise={"max_repeats": 1, "baseline_every": 10}, stop={"max_trials": 3})
    # The command's own max_target_length would win over the profile's (it comes first): move it to baseline.args.
    doc = yaml.safe_load(space.read_text())
    doc["command"] = [w for w in doc["command"] if not w.startswith("max_target_length=")]
    doc["baseline"]["args"]["max_target_length"] = 128
    space.write_text(yaml.safe_dump(doc, sort_keys=False))
    storage = f"sqlite:///{tmp_path}/studies/flagopt.db"
    # --no-preflight: let the unknown flag reach MaxText (pre-flight would exclude it before any run).
    done = flagopt_run(space, storage, "--no-preflight", address_space=16 * 2**30)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    records = {r.profile: r for r in history(load_study(storage, "mx-failures"))}
    assert records["baseline-deployed"].status == "ok"

    flag = records["unknown_flag"].attrs
    assert (records["unknown_flag"].status, flag["failure_class"]) == ("invalid", "unknown-flag")
    assert flag["failure_details"]["unknown_flags"] == ["--xla_flagopt_no_such_flag=true"]
    assert any("Unknown flag in XLA_FLAGS: --xla_flagopt_no_such_flag=true" in line for line in flag["failure_lines"])

    typo = records["key_typo"].attrs
    assert (records["key_typo"].status, typo["failure_class"]) == ("failed", "crash")
    assert typo["failure_details"]["signature"] == "maxtext-config-key"
    assert typo["failure_reason"].startswith("MaxText's config has no key 'per_device_batch_sizee'")
    assert any("MAXTEXT CONFIG ERROR: 'per_device_batch_sizee' not in" in line for line in typo["failure_lines"])

    oom = records["oom"].attrs
    assert (records["oom"].status, oom["failure_class"]) == ("infeasible", "oom")
    assert oom["failure_details"]["requested_bytes"] > 16 * 2**30
    assert any("RESOURCE_EXHAUSTED: Out of memory allocating" in line for line in oom["failure_lines"])
    assert all(r.attrs.get("retry_of") is None for r in records.values())  # none of these is retried
