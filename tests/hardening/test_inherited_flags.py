"""Issue 22 D5: the driver's inherited XLA_FLAGS are part of what a study measures."""

from __future__ import annotations

from flagopt.study import history, load_study
from tests.hardening.conftest import run


def test_a_resume_from_a_shell_with_other_xla_flags_is_refused_not_pooled(space, tmp_path, capsys, monkeypatch):
    storage = f"sqlite:///{tmp_path}/studies/flagopt.db"
    monkeypatch.delenv("XLA_FLAGS", raising=False)
    assert run(space, storage, "--trials", "1") == 0
    monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_enable_fast_math=false")
    assert run(space, storage, "--trials", "1") == 1
    err = capsys.readouterr().err
    assert 'inherited: {} -> {"XLA_FLAGS": "--xla_cpu_enable_fast_math=false"}' in err or \
        'inherited.XLA_FLAGS: (absent) -> "--xla_cpu_enable_fast_math=false"' in err, err
    assert "every run starts from them" in err
    assert len(history(load_study(storage, "s0"))) == 1  # nothing pooled
    # --rebaseline: a new epoch that never mixes with the runs made under the other flags
    assert run(space, storage, "--trials", "1", "--rebaseline") == 0
    monkeypatch.delenv("XLA_FLAGS")
    assert run(space, storage, "--trials", "1") == 1
