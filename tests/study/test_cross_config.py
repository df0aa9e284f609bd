"""The cross-config check: a confirmed winner is re-run on each other config and made conditional if it regresses."""

from __future__ import annotations

from flagopt.cli import main
from flagopt.study import history, load_study

# +20 % on config a, -5 % on config b when FAST=1: a flag that helps one MoE config and hurts another.
JOB = ("import os, sys\\n"
       "args = dict(a.split('=', 1) for a in sys.argv[1:])\\n"
       "fast = os.environ.get('FAST') == '1'\\n"
       "v = 50000 * ((1.2 if args.get('cfg') == 'a' else 0.95) if fast else 1.0)\\n"
       "for i in range(15): print(f'completed step: {i}, seconds: 0.1, Tokens/s/device: {v:.1f}, loss: 2.0')")


def test_winner_regressing_on_another_config_is_conditional(write_space, storage):
    space = write_space(f"""
        name: cross
        command: ["{{python}}", "-c", "{JOB}"]
        baseline: {{args: {{cfg: a}}}}
        configs:
          moe_b: {{args: {{cfg: b}}}}
        profiles:
          fast: {{env: {{FAST: "1"}}}}
        stop: {{win: 0.05, max_trials: 30}}
    """)
    assert main(["run", "--space", str(space), "--storage", storage, "--no-preflight", "--quiet"]) == 0
    study = load_study(storage, "cross")
    verdict = study.user_attrs["flagopt.verdict"]
    assert verdict["reason"] == "win" and verdict["winner"]["label"] == "fast"
    cross = verdict["winner"]["cross_config"]["moe_b"]
    assert abs(cross["gain"] - (-0.05)) < 0.005 and cross["ci"][1] < 0
    assert verdict["winner"]["conditional_on_config"] is True and "CONDITIONAL" in verdict["message"]
    runs = [r for r in history(study) if r.kind == "cross-config"]
    roles = [r.attrs["cross_role"] for r in runs]
    assert roles.count("baseline") >= 3 and roles.count("winner") >= 3
    assert all(r.attrs["argv"][-1] == "cfg=b" for r in runs)  # the config's args win over the baseline's
    assert all(r.attrs["env"].get("FAST") == "1" for r in runs if r.attrs["cross_role"] == "winner")
