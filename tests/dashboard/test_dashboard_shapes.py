"""The dashboard answers for every study shape: a study of profiles only (no sampled param) included."""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request

import optuna
import pytest

optuna_dashboard = pytest.importorskip("optuna_dashboard")

from flagopt.cli import main  # noqa: E402
from flagopt.dashboard import make_server  # noqa: E402
from flagopt.study import load_study  # noqa: E402

FAULTY = '["{python}", "-m", "flagopt.workloads.faulty", "steps=15", "step_s=0.003"]'


def get(port: int, path: str) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=60) as response:
            return response.status, json.load(response)
    except urllib.error.HTTPError as exc:
        return exc.code, {}


def test_param_importances_of_a_study_without_params(tmp_path):
    space = tmp_path / "space.yaml"
    space.write_text(f"name: profiles\ncommand: {FAULTY}\nprofiles: {{p: {{args: {{tokens_per_s: 51000}}}}}}\n"
                     "stop: {max_trials: 3}\n")
    storage = f"sqlite:///{tmp_path}/studies/flagopt.db"
    assert main(["run", "--space", str(space), "--storage", storage, "--no-preflight", "--quiet"]) == 0
    study = load_study(storage, "profiles")
    assert len([t for t in study.trials if t.value is not None]) >= 2 and not any(t.params for t in study.trials)
    server = make_server(storage, port=0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        port = server.server_address[1]
        assert get(port, f"/api/studies/{study._study_id}/param_importances") == (200, {"param_importances": [[]]})
        status, detail = get(port, f"/api/studies/{study._study_id}")
        assert status == 200 and len(detail["trials"]) == len(study.trials)
        assert get(port, "/api/studies/999/param_importances")[0] == 404  # optuna-dashboard's own answer
    finally:
        server.shutdown()


def test_param_importances_of_a_study_whose_every_sampled_run_failed(tmp_path):
    # Completed baselines without params and a sampled param only on FAIL trials: optuna-dashboard leaves FAIL
    # trials out of its union search space, so the same division by zero as a study without params.
    space = tmp_path / "space.yaml"
    space.write_text(f"name: all-failed\ncommand: {FAULTY}\n"
                     "params: {sc: {arg: scenario, choices: [crash, nccl-init]}}\nstop: {max_trials: 4}\n"
                     "screen: false\n")  # sampled points from the first run on
    storage = f"sqlite:///{tmp_path}/studies/flagopt.db"
    assert main(["run", "--space", str(space), "--storage", storage, "--no-preflight", "--quiet"]) == 0
    study = load_study(storage, "all-failed")
    complete, failed = ([t for t in study.trials if t.state == state]
                        for state in (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.FAIL))
    assert len(complete) >= 1 and not any(t.params for t in complete) and any(t.params for t in failed)
    server = make_server(storage, port=0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        port = server.server_address[1]
        status, body = get(port, f"/api/studies/{study._study_id}/param_importances")
        # empty importances, or (once a failing value is blamed and a sampled point with it is told as a
        # constraint violation) importances over those pruned points: never the division by zero's HTTP 500
        assert status == 200 and isinstance(body["param_importances"], list)
    finally:
        server.shutdown()


def test_dashboard_refuses_a_port_out_of_range_and_a_missing_storage(tmp_path, capsys):
    storage = f"sqlite:///{tmp_path}/nowhere/flagopt.db"
    assert main(["dashboard", "--storage", storage, "--port", "99999"]) == 2
    assert capsys.readouterr().err.strip() == "flagopt: error: --port: 99999: must be a TCP port, 0..65535 (0: any free port)"
    assert main(["dashboard", "--storage", storage, "--port", "0"]) == 1
    assert "no study storage at" in capsys.readouterr().err
    assert not (tmp_path / "nowhere").exists()
