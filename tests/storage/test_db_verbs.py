"""`studies` and `delete` on a team's database server: the study's lock is a row there, the folder under
$FLAGOPT_ARTIFACTS; the fingerprint's full text is a system attr the server stores."""

from __future__ import annotations

import json
import textwrap

import optuna

from flagopt.cli import main
from flagopt.study import load_study, study_folder

SPACE = """
    name: db-verbs
    command: ["{python}", "-m", "flagopt.workloads.faulty", "steps=15", "step_s=0.003"]
    profiles:
      faster: {args: {tokens_per_s: 60000}}
    screen: false
    stop: {max_trials: 2}
"""


def test_studies_and_delete_on_a_database_server(fresh_db, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("FLAGOPT_ARTIFACTS", str(tmp_path / "artifacts"))
    space = tmp_path / "space.yaml"
    space.write_text(textwrap.dedent(SPACE))
    assert main(["run", "--space", str(space), "--storage", fresh_db, "--no-preflight", "--quiet"]) == 0
    study = load_study(fresh_db, "db-verbs")
    assert study.user_attrs["flagopt.fingerprint"].startswith("sha256:")
    assert "command" in study._storage.get_study_system_attrs(study._study_id)["flagopt.fingerprint.full"]
    capsys.readouterr()
    assert main(["studies", "--storage", fresh_db, "--json"]) == 0
    (line,) = json.loads(capsys.readouterr().out)
    assert line["name"] == "db-verbs" and line["runs"] == 2
    folder = study_folder(fresh_db, "db-verbs")
    assert folder.is_dir() and str(folder).startswith(str(tmp_path / "artifacts"))
    assert main(["delete", "db-verbs", "--storage", fresh_db, "--yes"]) == 0
    assert not folder.exists()
    assert optuna.get_all_study_names(fresh_db) == []
