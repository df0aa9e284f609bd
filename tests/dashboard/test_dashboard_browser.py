"""Headless chromium (Debian's, never a downloaded one) on the dashboard and on the report's HTML page."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

CHROMIUM = Path("/usr/bin/chromium")
pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian chromium: apt-get install -y chromium")]
sync_api = pytest.importorskip("playwright.sync_api", reason="needs playwright: pip install playwright")
pytest.importorskip("optuna_dashboard")

from flagopt.dashboard import NOTE_TITLE, make_server, update_live_view  # noqa: E402
from flagopt.report import write_report  # noqa: E402
from flagopt.study import load_study  # noqa: E402
from tests.report.studies import HOSTILE_ENV, private_copy  # noqa: E402

ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]
TIMEOUT_MS = 60_000


def wait_text(page, text: str) -> None:
    """Wait until the rendered page shows ``text`` (the dashboard loads its data after the first paint)."""
    page.wait_for_function("t => document.body.innerText.includes(t)", arg=text, timeout=TIMEOUT_MS)


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        yield chromium
        chromium.close()


@pytest.fixture(scope="module")
def dashboard(built, tmp_path_factory):
    copy = private_copy(built, tmp_path_factory.mktemp("browser"))
    study = load_study(copy.storage, "sim-llm-fsdp")
    update_live_view(study)
    server = make_server(copy.storage, port=0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}", study._study_id
    server.shutdown()
    server.server_close()


def test_dashboard_lists_the_study_and_shows_attrs_and_note(browser, dashboard, tmp_path):
    url, study_id = dashboard
    page = browser.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(f"{url}/dashboard")
    wait_text(page, "sim-llm-fsdp")
    assert page.get_by_text("sim-llm-pp").count() >= 1
    page.goto(f"{url}/dashboard/studies/{study_id}")
    wait_text(page, "Study User Attributes")
    wait_text(page, "drift-corrected, confidence interval")  # flagopt's registered Δ% figure
    assert "FSDP=64" in page.inner_text("body")
    page.screenshot(path=str(tmp_path / "study.png"), full_page=True)
    page.goto(f"{url}/dashboard/studies/{study_id}/note")
    wait_text(page, NOTE_TITLE.lstrip("# "))
    assert "ag1g" in page.inner_text("body")
    page.screenshot(path=str(tmp_path / "note.png"), full_page=True)
    assert (tmp_path / "study.png").stat().st_size > 0 and (tmp_path / "note.png").stat().st_size > 0
    assert errors == []
    page.close()


def test_trial_user_attrs_are_visible(browser, dashboard, fsdp):
    url, study_id = dashboard
    page = browser.new_page()
    page.goto(f"{url}/dashboard/studies/{study_id}/trials")
    wait_text(page, "config_key")
    assert "baseline-deployed" in page.inner_text("body")
    number = next(r.number for r in fsdp.records if r.profile == "hostile")
    hostile = page.get_by_text(f"Trial {number}", exact=True).first
    hostile.click()
    wait_text(page, "NCCL_HOSTILE")
    assert HOSTILE_ENV in page.inner_text("body")
    page.close()


def test_report_html_renders_offline_with_every_figure(browser, pp, tmp_path):
    _, html_path = write_report(pp, tmp_path)
    page = browser.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    # Offline: any request that is not the file itself fails the test.
    requests: list[str] = []
    page.on("request", lambda req: requests.append(req.url))
    page.goto(html_path.resolve().as_uri())
    page.wait_for_function("document.querySelectorAll('.js-plotly-plot').length >= 4", timeout=TIMEOUT_MS)
    assert page.locator(".js-plotly-plot").count() == 4
    assert page.locator(".js-plotly-plot .main-svg").count() >= 4  # drawn, not just placeholders
    page.screenshot(path=str(tmp_path / "report.png"), full_page=True)
    assert errors == []
    assert all(u.startswith("file://") or u.startswith("data:") for u in requests), requests
    page.close()
