"""A resumed study with a raised budget: no stale verdict, the new budget; a control run never reads as a gain."""

from __future__ import annotations

from flagopt.cli import main

FAULTY = '["{python}", "-m", "flagopt.workloads.faulty", "steps=15", "step_s=0.003"]'
SPACE = """
name: raised
command: {command}
baseline: {{env: {{FLAGOPT_DEPLOYED: "1"}}}}
profiles:
  a: {{env: {{FLAGOPT_A: "1"}}}}
  b: {{env: {{FLAGOPT_B: "1"}}}}
stop: {{max_trials: {max_trials}}}
noise: {{baseline_every: 2}}
"""


def test_raising_max_trials_and_resuming_drops_the_old_budget_verdict(write_space, storage, capsys):
    space = write_space(SPACE.format(command=FAULTY, max_trials=2))
    assert main(["run", "--space", str(space), "--storage", storage, "--no-preflight"]) == 0
    out = capsys.readouterr().out
    assert "max_trials (2) runs used" in out
    # every control run is the reference, never "+41 % vs baseline-deployed"
    lines = [line for line in out.splitlines() if "ok" in line and "steady" in line]
    assert lines and all(("baseline-deployed control" in line) != ("vs baseline-deployed" in line) for line in lines)
    assert any("baseline-deployed control" in line for line in lines)

    write_space(SPACE.format(command=FAULTY, max_trials=6))
    assert main(["run", "--space", str(space), "--storage", storage, "--no-preflight", "--quiet", "--trials", "1"]) == 0
    capsys.readouterr()
    assert main(["status", "raised", "--storage", storage]) == 0
    status = capsys.readouterr().out
    assert "max_trials (2)" not in status and "budget: 3 of max_trials 6 runs used" in status
    assert main(["leaderboard", "raised", "--storage", storage]) == 0
    board = capsys.readouterr().out
    assert "max_trials (2)" not in board and "budget: 3 of max_trials 6 runs used" in board
