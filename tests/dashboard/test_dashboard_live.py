"""flagopt's live view on a study (note + figures), and the dashboard server answering over HTTP."""

from __future__ import annotations

import json
import threading
import urllib.request

import pytest

optuna_dashboard = pytest.importorskip("optuna_dashboard")

from flagopt.dashboard import FIGURE_IDS, NOTE_TITLE, live_note, make_server, update_live_view  # noqa: E402
from flagopt.report import study_data  # noqa: E402
from flagopt.study import load_study  # noqa: E402
from tests.report.studies import private_copy  # noqa: E402


@pytest.fixture(scope="module")
def copy(built, tmp_path_factory):
    """A private storage: the live view writes to the study."""
    return private_copy(built, tmp_path_factory.mktemp("dash"))


def test_note_has_the_verdict_leaderboard_and_failures(fsdp):
    note = live_note(fsdp)
    assert note.startswith(NOTE_TITLE)
    assert fsdp.verdict["message"] in note
    for row in fsdp.frame[fsdp.frame["delta_pct"].notna()].itertuples():
        assert f"{row.delta_pct:+.2f}" in note
    for cls in {r.attrs["failure_class"] for r in fsdp.records if r.attrs.get("failure_class")}:
        assert cls in note
    assert "⭐ " + fsdp.winner["label"] in note


def test_update_live_view_saves_the_note_and_registers_figures(copy):
    study = load_study(copy.storage, "sim-llm-fsdp")
    update_live_view(study)
    update_live_view(study)  # the live view observer calls it after every trial: the figures are replaced, not piled up
    assert optuna_dashboard.get_note(study) == live_note(study_data(copy.storage, "sim-llm-fsdp"))
    system = study._storage.get_study_system_attrs(study._study_id)
    for graph_id in FIGURE_IDS.values():
        keys = [k for k in system if k.startswith(f"dashboard:plot_data:{graph_id}:")]
        assert keys, graph_id
        figure = json.loads("".join(system[k] for k in sorted(keys, key=lambda k: int(k.rsplit(":", 1)[1]))))
        assert figure["data"], graph_id


def test_server_lists_the_studies_on_localhost(copy):
    server = make_server(copy.storage, port=0)
    assert server.server_address[0] == "127.0.0.1"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        port = server.server_address[1]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/studies", timeout=30) as response:
            names = {s["study_name"] for s in json.load(response)["study_summaries"]}
        assert names == {"sim-llm-fsdp", "sim-llm-pp", "sim-llm-partial"}
    finally:
        server.shutdown()
        server.server_close()


def test_port_in_use_is_a_clear_error(copy):
    from flagopt.errors import FlagoptError
    first = make_server(copy.storage, port=0)
    try:
        with pytest.raises(FlagoptError, match="cannot listen"):
            make_server(copy.storage, port=first.server_address[1])
    finally:
        first.server_close()
