"""Issue 22: D15 (a baseline that never ran is not a success), D20 (Slurm options on a local space are refused)."""

from __future__ import annotations

import pytest

from tests.hardening.conftest import one_line, run


def test_a_study_whose_baseline_never_ran_exits_non_zero(space, tmp_path, capsys):
    # D15: every run crashed and `run` still exited 0 with verdict baseline-failed
    space.write_text(space.read_text().replace('"steps=15"', '"scenario=crash", "after=0", "steps=15"')
                     .replace("max_trials: 4", "max_trials: 1"))
    assert run(space, f"sqlite:///{tmp_path}/studies/flagopt.db") == 1


@pytest.mark.parametrize("option", [["--nodelist", "gpu[01-02]"], ["--partition", "batch"], ["--slot", "gpu01"]])
def test_slurm_options_on_a_local_space_are_refused_not_ignored(space, tmp_path, capsys, option):
    # D20: silently ignored; the study ran here
    assert run(space, f"sqlite:///{tmp_path}/studies/flagopt.db", *option) == 2
    err = one_line(capsys)
    assert f"run: {option[0]}: applies to the Slurm executor" in err
    assert not (tmp_path / "studies").exists()
