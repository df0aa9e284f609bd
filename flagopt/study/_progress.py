"""Live progress for ``flagopt run``: one line per trial, and a live status (step k/N, best so far, ETA)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.markup import escape

from flagopt.executors import log_path_for
from flagopt.logs import last_step

from flagopt.study._observer import StudyObserver

if TYPE_CHECKING:
    import optuna

    from flagopt.study._collect import Collected
    from flagopt.study._planner import Plan, Verdict


class Progress(StudyObserver):
    """The console observer: one line per trial; the live status line only appears on a terminal."""

    def __init__(self, console: Console | None = None, quiet: bool = False) -> None:
        self.console = console or Console(stderr=False, highlight=False)
        self.quiet = quiet
        self._status: Any = None
        self._started: dict[int, float] = {}
        self._durations: list[float] = []
        self._last_text = ""

    def note(self, text: str) -> None:
        if not self.quiet:
            self.console.print(f"[dim]·[/dim] {text}")

    def say(self, text: str) -> None:
        """What the user must hear even with --quiet (a changed space accepted, a new epoch)."""
        self.console.print(f"[dim]·[/dim] {escape(text)}")

    def launched(self, number: int, plan: Plan, job_id: str) -> None:
        self._started[number] = time.time()
        if self.quiet:
            return
        if self.console.is_terminal and self._status is None:
            self._status = self.console.status("")
            self._status.start()
        label = plan.config.profile if plan.kind != "sampled" else "sampled"
        where = f" on {plan.slot}" if plan.slot else ""
        self.note(f"trial {number} [bold]{label}[/bold] ({plan.reason}) job {job_id}{where}")

    def waiting(self, number: int, trial_dir: str, final_step: int, best: str) -> None:
        if self._status is None:
            return
        try:
            text = log_path_for(trial_dir, 0).read_text(errors="replace")
        except OSError:
            text = ""
        step = last_step(text)
        elapsed = time.time() - self._started.get(number, time.time())
        eta = ""
        if self._durations:
            mean = sum(self._durations) / len(self._durations)
            eta = f" · ETA {max(0.0, mean - elapsed):.0f} s"
        self._status.update(f"trial {number} · step {'-' if step is None else step}/{final_step} · "
                            f"{elapsed:.0f} s{eta} · best {best}")

    def told(self, study: optuna.Study, number: int, plan: Plan, collected: Collected) -> None:
        if number in self._started:
            self._durations.append(time.time() - self._started.pop(number))
        if self.quiet:
            return
        a = collected.attrs
        if collected.status == "ok":
            steady = a.get("steady")
            self.console.print(f"  trial {number}: [green]ok[/green] steady {steady:,.1f} · "
                               f"Δ {a.get('delta_pct', 0.0):+.2f}% vs baseline-deployed")
        else:
            self.console.print(f"  trial {number}: [red]{collected.status}[/red] "
                               f"{a.get('failure_class', '')} {a.get('failure_reason', '')}".rstrip())

    def verdict(self, study: optuna.Study, verdict: Verdict | None) -> None:
        self.close()
        if verdict is not None and not self.quiet:
            self.console.print(f"[bold]verdict ({verdict.reason}):[/bold] {verdict.message}")

    def close(self) -> None:
        if self._status is not None:
            self._status.stop()
            self._status = None
