"""`flagopt dashboard` backfills flagopt's note and figures on studies run without optuna-dashboard installed (the
README's main job installs only `[jax]`), and says which it wrote and why any could not be."""

from __future__ import annotations

import sys
import textwrap
from wsgiref.simple_server import WSGIServer

import optuna
import pytest

optuna_dashboard = pytest.importorskip("optuna_dashboard")

from flagopt.cli import main  # noqa: E402
from flagopt.dashboard import FIGURE_IDS, NOTE_TITLE  # noqa: E402
from flagopt.study import load_study  # noqa: E402

SPACE = """
    name: plain
    command: ["{python}", "-m", "flagopt.workloads.faulty", "steps=15", "step_s=0.003"]
    profiles:
      faster: {args: {tokens_per_s: 60000}}
    screen: false
    stop: {max_trials: 3}
"""


def serve_once(monkeypatch):
    """The real server is made and bound; serving stops at once as Ctrl-C would stop it."""
    def interrupted(self, *args, **kwargs):
        raise KeyboardInterrupt
    monkeypatch.setattr(WSGIServer, "serve_forever", interrupted)


def test_dashboard_writes_the_missing_note_and_figures(tmp_path, monkeypatch, capsys):
    space = tmp_path / "space.yaml"
    space.write_text(textwrap.dedent(SPACE))
    storage = f"sqlite:///{tmp_path}/flagopt.db"
    with monkeypatch.context() as without:
        without.setitem(sys.modules, "optuna_dashboard", None)  # `import optuna_dashboard` fails, as uninstalled
        assert main(["run", "--space", str(space), "--storage", storage, "--no-preflight", "--quiet"]) == 0
    study = load_study(storage, "plain")
    assert optuna_dashboard.get_note(study) == ""
    optuna.create_study(study_name="not-flagopt", storage=storage)  # Optuna's own: left alone
    capsys.readouterr()

    serve_once(monkeypatch)
    assert main(["dashboard", "--storage", storage, "--port", "0"]) == 0
    err = capsys.readouterr().err
    assert "wrote flagopt's note and figures for plain (missing or out of date" in err
    assert optuna_dashboard.get_note(study).startswith(NOTE_TITLE)
    system = study._storage.get_study_system_attrs(study._study_id)
    for graph_id in FIGURE_IDS.values():
        assert any(k.startswith(f"dashboard:plot_data:{graph_id}:") for k in system), graph_id
    other = load_study(storage, "not-flagopt")
    assert optuna_dashboard.get_note(other) == ""

    assert main(["dashboard", "--storage", storage, "--port", "0"]) == 0  # current now: nothing rewritten
    assert "wrote" not in capsys.readouterr().err


def test_a_study_that_cannot_be_drawn_is_named_with_why(tmp_path, monkeypatch, capsys):
    storage = f"sqlite:///{tmp_path}/flagopt.db"
    broken = optuna.create_study(study_name="broken", storage=storage)
    broken.set_user_attr("flagopt.space", {"noise": {"no_such_setting": 1, "baseline_every": "x"}})
    broken.set_user_attr("metric", {"window": "not a window"})
    serve_once(monkeypatch)
    assert main(["dashboard", "--storage", storage, "--port", "0"]) == 0
    err = capsys.readouterr().err
    assert "flagopt dashboard: no flagopt note for broken: " in err
