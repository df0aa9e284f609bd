"""optuna-dashboard on the study storage, plus flagopt's live view: a study note and registered figures.

``flagopt run`` wires :class:`LiveView` to the driver's events, so :func:`update_live_view` runs after every trial
and the dashboard shows the leaderboard, the verdict and the failures as the study goes, next to Optuna's own plots.

Example:
    >>> server = make_server("sqlite:///studies/flagopt.db", port=8080)  # doctest: +SKIP
    >>> server.serve_forever()  # doctest: +SKIP
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Iterable
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server as _wsgi_server

import optuna

from flagopt.errors import FlagoptError
from flagopt.report import cell, code, draw, failures_of, figure_data, rows_of
from flagopt.study import StudyData, StudyObserver, open_storage, slot_line, straggler_note, study_data_of

#: figures registered on the study (stable ids, so each update replaces the previous version)
FIGURE_IDS = {"gains": "flagopt-gains", "timeline": "flagopt-timeline", "steps": "flagopt-steps"}
NOTE_TITLE = "## flagopt live view"
_INSTALL = "optuna-dashboard is not installed: pip install 'flagopt[dashboard]' (or pip install optuna-dashboard)"


def _dashboard() -> Any:
    try:
        import optuna_dashboard
    except ImportError:
        raise FlagoptError("dashboard", None, _INSTALL) from None
    return optuna_dashboard


def live_note(data: StudyData) -> str:
    """The study note: verdict, leaderboard (top 10) and failures, in markdown."""
    lines = [NOTE_TITLE, "", f"**{cell(data.model_tag)}** ({cell(data.parallelism or '-')}), "
             f"{len(data.all_records)} trials, Δ% drift-corrected vs baseline-deployed.", ""]
    verdict = data.verdict
    lines.append(f"**Verdict ({verdict.get('reason')})**: {data.verdict_text}" if verdict
                 else "**Verdict**: none yet (the study is running or stopped before deciding).")
    slots = data.slot_summary()
    if len(slots) > 1 or any(s.lost for s in slots):
        lines += ["", "**Slots**: " + "; ".join(cell(slot_line(s)) for s in slots)]
    top, bottom = rows_of(data)
    lines += ["", "| profile | flags | Δ% | CI | verdict | runs |", "|---|---|---|---|---|---|"]
    for r in (*top, *bottom)[:10]:
        ci = f"[{r.ci_pct[0]:+.2f}, {r.ci_pct[1]:+.2f}]" if r.ci_pct else ""
        lines.append("| " + " | ".join(cell(x) for x in (("⭐ " if r.winner else "") + r.profile, code(r.flags)[:200],
                                                         f"{r.delta_pct:+.2f}", ci, r.verdict, r.runs)) + " |")
    if slow := straggler_note(data.records, data.direction):
        lines += ["", cell(slow)]
    failures = failures_of(data.records)
    if failures:
        lines += ["", "**Failures**: " + "; ".join(f"{f.failure_class} x{f.count}" for f in failures)]
        lines += [f"- {cell(f.examples[0])[:300]}" for f in failures]
    return "\n".join(lines) + "\n"


def update_live_view(study: optuna.Study) -> None:
    """Write flagopt's note on ``study`` and (re)register its figures; call after every trial.

    Does nothing when optuna-dashboard is not installed (the study runs the same without it).
    """
    try:
        import optuna_dashboard
    except ImportError:
        return
    data = study_data_of(study)
    optuna_dashboard.save_note(study, live_note(data))
    figures = draw(figure_data(data))
    for key, graph_id in FIGURE_IDS.items():
        optuna_dashboard.save_plotly_graph_object(study, figures[key], graph_object_id=graph_id)


def backfill_live_views(storage: optuna.storages.BaseStorage) -> tuple[list[str], dict[str, str]]:
    """Write the note and figures of every flagopt study whose note is missing or out of date.

    A study run where optuna-dashboard was not installed (the README's main job installs only ``[jax]``) never got
    them; nor did trials recorded since by such a driver. Returns the studies written, and why each study that
    could not be is not (a display problem never stops the dashboard).
    """
    import optuna_dashboard
    written: list[str] = []
    why_not: dict[str, str] = {}
    for summary in sorted(optuna.get_all_study_summaries(storage, include_best_trial=False),
                          key=lambda s: s.study_name):
        if "flagopt.space" not in summary.user_attrs:
            continue  # not a flagopt study: Optuna's own pages are all it has
        try:
            study = optuna.load_study(study_name=summary.study_name, storage=storage)
            if optuna_dashboard.get_note(study) == live_note(study_data_of(study)):
                continue
            update_live_view(study)
            written.append(summary.study_name)
        except Exception as exc:  # one study's bad record must not hide the others
            why_not[summary.study_name] = f"{type(exc).__name__}: {exc}"
    return written, why_not


class LiveView(StudyObserver):
    """The study observer that keeps optuna-dashboard's note and figures current (a no-op without optuna-dashboard).

    ``note`` hears a display problem, which never stops a study.
    """

    def __init__(self, note: Callable[[str], None]) -> None:
        self._note = note

    def _refresh(self, study: optuna.Study) -> None:
        try:
            update_live_view(study)
        except Exception as exc:  # a display problem must never stop a study
            self._note(f"dashboard note not updated: {exc}")

    def told(self, study: optuna.Study, number: int, plan: Any, collected: Any) -> None:
        self._refresh(study)

    def verdict(self, study: optuna.Study, verdict: Any) -> None:
        self._refresh(study)


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (the base class's name)
        logging.getLogger("flagopt.dashboard").debug(format, *args)


_IMPORTANCES = re.compile(r"/api/studies/(\d+)/param_importances\Z")


def importances_for_every_study(app: Callable, storage: optuna.storages.BaseStorage) -> Callable:
    """Wrap optuna-dashboard's WSGI app so that a study without any usable param gets empty importances.

    optuna-dashboard (0.21) answers HTTP 500 there: with two or more completed trials and no param importance,
    ``get_param_importance_from_trials_cache`` falls back to ``1 / len(union_search_space)``, and that union
    leaves FAIL trials out, so it is empty (ZeroDivisionError) when no trial outside FAIL has a param. Flagopt
    studies of that shape: profiles only, and a study whose every sampled run has failed so far (its completed
    trials are baselines and profiles); see docs/report.md.
    """

    def wrapped(environ: dict[str, Any], start_response: Callable) -> Iterable[bytes]:
        match = _IMPORTANCES.match(environ.get("PATH_INFO", ""))
        if match:
            study_id = int(match.group(1))
            try:
                directions = storage.get_study_directions(study_id)
                trials = storage.get_all_trials(study_id, deepcopy=False)
            except KeyError:
                return app(environ, start_response)  # its own 404
            if not any(t.params for t in trials if t.state != optuna.trial.TrialState.FAIL):
                body = json.dumps({"param_importances": [[] for _ in directions]}).encode()
                start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
                return [body]
        return app(environ, start_response)

    return wrapped


#: the HTTP methods that only read: anything else (optuna-dashboard's DELETE of a study, its POSTs of notes and
#: attrs) changes the study, and the dashboard answers it with 405 unless started with ``allow_edits``
READ_METHODS = ("GET", "HEAD", "OPTIONS")


def read_only(app: Callable) -> Callable:
    """``app`` that refuses every request that would change a study (HTTP 405, a JSON reason)."""
    def guarded(environ: dict[str, Any], start_response: Callable) -> Iterable[bytes]:
        if environ.get("REQUEST_METHOD", "GET").upper() in READ_METHODS:
            return app(environ, start_response)
        body = json.dumps({"reason": "the flagopt dashboard is read-only (start it with --allow-edits to change "
                                     "or delete studies)"}).encode()
        start_response("405 Method Not Allowed", [("Content-Type", "application/json"),
                                                  ("Content-Length", str(len(body))), ("Allow", ", ".join(READ_METHODS))])
        return [body]

    return guarded


def make_server(storage: str | None, host: str = "127.0.0.1", port: int = 8080, *,
                allow_edits: bool = False) -> WSGIServer:
    """A WSGI server for optuna-dashboard on ``storage`` (bound, not yet serving; port 0 picks a free one); read-only
    unless ``allow_edits``.

    A storage that does not exist is an error (nothing is created).
    """
    if not 0 <= port <= 65535:
        raise FlagoptError("--port", str(port), "must be a TCP port, 0..65535 (0: any free port)")
    dashboard = _dashboard()
    opened = open_storage(storage, create=False)
    app = importances_for_every_study(dashboard.wsgi(opened), opened)
    if not allow_edits:
        app = read_only(app)
    try:
        return _wsgi_server(host, port, app, handler_class=_QuietHandler)
    except OSError as exc:
        raise FlagoptError("--port", str(port), f"cannot listen on {host}:{port}: {exc.strerror}") from None
