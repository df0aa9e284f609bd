"""Metric options end to end through ``flagopt run``: a minimized metric, and a custom regex step line."""

from __future__ import annotations

import json

import pytest

from flagopt.cli import main
from flagopt.study import history, load_study

FAULTY = '["{python}", "-m", "flagopt.workloads.faulty", "steps=15", "step_s=0.005"]'


def run(space, storage, *extra):
    return main(["run", "--space", str(space), "--storage", storage, "--no-preflight", "--quiet", *extra])


def test_minimized_seconds_give_positive_gain_when_faster(write_space, storage, capsys):
    # faulty prints seconds = 32768 / tokens: 2 % more tokens/s is 1/1.02 the seconds, i.e. a +2 % gain.
    space = write_space(f"""
        name: minimize
        command: {FAULTY}
        metric: {{field: seconds, direction: minimize}}
        profiles:
          faster: {{args: {{tokens_per_s: 51000}}}}
        stop: {{max_trials: 4}}
    """)
    assert run(space, storage) == 0
    records = {r.profile: r for r in history(load_study(storage, "minimize"))}
    base = records["baseline-deployed"]
    assert base.steady == pytest.approx(32768 / 50000, rel=1e-2)  # steady is the raw metric, as printed
    assert records["faster"].attrs["delta_pct"] == pytest.approx(2.0, abs=0.3)
    assert records["faster"].steady < base.steady
    capsys.readouterr()
    assert main(["leaderboard", "minimize", "--storage", storage, "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    rows = rows["rows"] if isinstance(rows, dict) else rows
    by_profile = {row["profile"]: row for row in rows}
    assert by_profile["faster"]["delta_pct"] > 1.0
    # Displayed steady values are seconds as the log printed them, not their inverse.
    assert by_profile["faster"]["steady"] == pytest.approx(records["faster"].steady, rel=1e-6)


def test_regex_metric_from_a_custom_python_job(write_space, storage):
    code = ("import sys\n"
            "rate = float(sys.argv[1].split('=')[1])\n"
            "for i in range(12): print(f'iter {i:03d} | {rate + i % 2:.1f} samples/sec', flush=True)\n")
    space = write_space(f"""
        name: custom
        command: ["{{python}}", "-c", {json.dumps(code)}]
        baseline: {{args: {{rate: 100}}}}
        metric:
          format: regex
          regex: 'iter (?P<step>\\d+) \\| (?P<value>[0-9.]+) samples/sec'
          window: [4, 9]
        profiles:
          more: {{args: {{rate: 110}}}}
        stop: {{max_trials: 3}}
    """)
    assert run(space, storage) == 0
    records = {r.profile: r for r in history(load_study(storage, "custom"))}
    assert all(r.status == "ok" for r in records.values())
    assert len(records["more"].attrs["steps"]) == 12
    assert records["baseline-deployed"].steady == pytest.approx(100.5)
    assert records["more"].steady == pytest.approx(110.5)
    assert records["more"].attrs["delta_pct"] == pytest.approx(100 * (110.5 / 100.5 - 1), rel=1e-3)


def test_a_non_positive_steady_value_is_a_failed_measurement(write_space, storage):
    space = write_space("""
        name: zero
        command: ["{python}", "-c", "for i in range(15): print(f'completed step: {i}, seconds: 0.0, Tokens/s/device: 0.0, loss: 1.0')"]
        metric: {field: seconds, direction: minimize}
        stop: {max_trials: 3}
    """)
    # every run failed, so the baseline never ran ok: verdict baseline-failed, exit 1 (issue 22 D15, issue 23 point 5)
    assert main(["run", "--space", str(space), "--storage", storage, "--no-preflight", "--quiet"]) == 1
    records = history(load_study(storage, "zero"))
    assert records and all(r.status == "failed" for r in records)
    assert "not a measurement" in records[0].attrs["failure_reason"]
