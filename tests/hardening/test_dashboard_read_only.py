"""Issue 22 D22: the dashboard is read-only unless told otherwise, and a non-loopback host is warned about."""

from __future__ import annotations

import threading
import urllib.error
import urllib.request

import optuna
import pytest

pytest.importorskip("optuna_dashboard")

from flagopt.cli._dashboard import _loopback  # noqa: E402
from flagopt.dashboard import make_server  # noqa: E402
from tests.hardening.conftest import run  # noqa: E402


def delete(port: int, study_id: int) -> int:
    request = urllib.request.Request(f"http://127.0.0.1:{port}/api/studies/{study_id}", method="DELETE")
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code


def test_an_unauthenticated_delete_does_not_delete_the_study(space, tmp_path):
    storage = f"sqlite:///{tmp_path}/studies/flagopt.db"
    assert run(space, storage, "--trials", "1") == 0
    study_id = optuna.load_study(study_name="s0", storage=storage)._study_id
    server = make_server(storage, port=0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        assert delete(server.server_address[1], study_id) == 405
        with urllib.request.urlopen(f"http://127.0.0.1:{server.server_address[1]}/api/studies", timeout=60) as r:
            assert r.status == 200
    finally:
        server.shutdown()
        server.server_close()
    assert [s.study_name for s in optuna.get_all_study_summaries(storage)] == ["s0"]


def test_only_loopback_hosts_go_unwarned():
    assert _loopback("127.0.0.1") and _loopback("::1") and _loopback("localhost") and _loopback("127.0.0.2")
    assert not _loopback("0.0.0.0") and not _loopback("::") and not _loopback("10.1.2.3") and not _loopback("login1")
