"""Issue 22 D23: a choice added and removed again before any run set it invalidates nothing."""

from __future__ import annotations

from flagopt.study import history, load_study
from tests.hardening.conftest import run


def test_removing_a_choice_no_run_set_needs_no_rebaseline(space, tmp_path, capsys):
    storage = f"sqlite:///{tmp_path}/studies/flagopt.db"
    space.write_text(space.read_text().replace("max_trials: 4", "max_trials: 2"))
    assert run(space, storage) == 0  # the budget is spent (baseline and one probe)
    space.write_text(space.read_text().replace("[Simple, LL]", "[Simple, LL, LL128]"))
    assert run(space, storage) == 0
    used = {(r.attrs.get("settings") or {}).get("env", {}).get("NCCL_PROTO") for r in history(load_study(storage, "s0"))}
    assert "LL128" not in used
    capsys.readouterr()
    space.write_text(space.read_text().replace("[Simple, LL, LL128]", "[Simple, LL]"))
    assert run(space, storage) == 0, capsys.readouterr().err
    assert "drops LL128, which no run of this epoch set" in capsys.readouterr().out
    # a value a run did set still may not be dropped silently
    space.write_text(space.read_text().replace("[Simple, LL]", "[LL]"))
    assert run(space, storage) == 1
    assert "--rebaseline" in capsys.readouterr().err
