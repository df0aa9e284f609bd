"""Whole studies on the real local Slurm cluster through ``flagopt run``: pinned and multi-node trials, a cancelled
and a hung trial, Slurm's time limit, a pinned node lost mid-study, an unknown node, and a changed nodelist."""

from __future__ import annotations

import json
import subprocess
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import optuna
import pytest

from flagopt.cli import main
from flagopt.executors._slurm_query import expand_nodelist, node_is_up, node_states, parse_slurm_time
from flagopt.study import RunRecord, history, load_study

pytestmark = pytest.mark.slurm

FAULTY = '["{python}", "-m", "flagopt.workloads.faulty", "steps=15", "step_s=0.01"]'


def write_space(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "space.yaml"
    path.write_text(textwrap.dedent(text))
    return path


def storage_of(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path}/flagopt.db"


def run(space: Path, storage: str, *extra: str) -> int:
    return main(["run", "--space", str(space), "--storage", storage, "--no-preflight", "--quiet", *extra])


def by_profile(records: list[RunRecord]) -> dict[str, list[RunRecord]]:
    out: dict[str, list[RunRecord]] = {}
    for r in records:
        out.setdefault(r.profile, []).append(r)
    return out


def sacct_jobs(job_ids: list[str], within_s: float = 30.0, nodes: int | None = None) -> dict[str, dict[str, str]]:
    """``{job id: {NodeList, State, Submit, Start, End}}`` straight from ``sacct``, once accounting has settled.

    slurmdbd applies the controller's messages with a lag, and for a second or two after a job's end ``sacct`` can
    still show a partial record (a 2-node job on ``node1``), so this waits for the same answer twice, 1 s apart,
    and, given ``nodes``, until every job lists that many nodes (seen lagging longer on a loaded 2-core machine).
    """
    fields = ("JobID", "NodeList", "State", "Submit", "Start", "End")
    deadline = time.time() + within_s
    previous: dict[str, dict[str, str]] | None = None
    while True:
        out = subprocess.run(["sacct", "-X", "-P", "-n", "-j", ",".join(job_ids), "-o", ",".join(fields)],
                             capture_output=True, text=True, check=True).stdout
        rows = {line.split("|")[0]: dict(zip(fields, line.split("|"))) for line in out.splitlines() if line}
        ended = set(rows) == set(job_ids) and all(row["End"] not in ("Unknown", "") for row in rows.values())
        if nodes is not None:
            ended = ended and all(len(expand_nodelist(row["NodeList"])) == nodes for row in rows.values())
        if (ended and rows == previous) or time.time() > deadline:
            return rows
        previous = rows if ended else None
        time.sleep(1.0)


def wait_until(predicate: Callable[[], object], within_s: float, what: str) -> object:
    end = time.time() + within_s
    while True:
        value = predicate()
        if value:
            return value
        if time.time() > end:
            raise AssertionError(f"timed out after {within_s:.0f} s waiting for {what}")
        time.sleep(0.2)


def trial_attrs(storage: str, study_name: str) -> list[dict]:
    """The study's trials' user attrs as another process would read them (empty until the study exists)."""
    if not (Path(storage.removeprefix("sqlite:///")).parent / study_name / "trials").exists():
        return []  # opening the storage before the driver has created it would race its schema creation
    try:
        study = optuna.load_study(study_name=study_name, storage=storage)
    except KeyError:
        return []
    return [dict(t.user_attrs, number=t.number) for t in study.get_trials(deepcopy=False)]


class Watcher(threading.Thread):
    """Runs ``action`` beside the driver (which runs in the test's thread); ``join_checked`` re-raises its error."""

    def __init__(self, action: Callable[[], None]) -> None:
        super().__init__(daemon=True)
        self._action = action
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self._action()
        except BaseException as exc:  # reported by join_checked, in the test's thread
            self.error = exc

    def join_checked(self) -> None:
        self.join(timeout=60)
        if self.error is not None:
            raise self.error


def node_up(name: str) -> bool:
    return node_is_up(node_states(name).get(name, "unknown"))


@contextmanager
def node_set_down(name: str) -> Iterator[Callable[[], None]]:
    """Yields ``down()``; whatever happens, the node is resumed and answers again before the next test."""
    try:
        yield lambda: subprocess.run(["scontrol", "update", f"nodename={name}", "state=down", "reason=flagopt-test"],
                                     check=True)
    finally:
        if not node_up(name):
            subprocess.run(["scontrol", "update", f"nodename={name}", "state=resume"], check=False)
        wait_until(lambda: node_up(name), 60, f"{name} to be up again")


# -- 1. pinned, multi-node -----------------------------------------------------------------------------------------
def test_study_on_two_pinned_nodes_runs_every_trial_there(slurm_cluster: set[str], tmp_path: Path) -> None:
    space = write_space(tmp_path, f"""
        name: pinned
        baseline: {{env: {{FLAGOPT_DEPLOYED: "1"}}}}  # something deployed, so wave 1 is both baselines
        command: {FAULTY}
        executor: {{kind: slurm, slurm: {{nodelist: "node1,node2", nodes: 2, tasks_per_node: 1}}}}
        profiles:
          fast: {{args: {{tokens_per_s: 51000}}}}
        stop: {{max_trials: 3, max_null: 100}}
        noise: {{baseline_every: 100}}
    """)
    storage = storage_of(tmp_path)
    assert run(space, storage) == 0
    study = load_study(storage, "pinned")
    assert study.user_attrs["flagopt.verdict"]["reason"] == "budget"
    assert study.user_attrs["flagopt.executor"]["nodelist"] == "node1,node2"
    records = history(study)
    assert [r.kind for r in records] == ["baseline-deployed", "baseline-no-env", "profile"]
    assert all(r.status == "ok" for r in records), [(r.status, r.attrs.get("failure_reason")) for r in records]
    (fast,) = by_profile(records)["fast"]
    assert fast.attrs["delta_pct"] == pytest.approx(2.0, abs=0.2)  # scored from rank 0's log, read after Slurm

    jobs = sacct_jobs([r.attrs["job_id"] for r in records], within_s=60, nodes=2)
    for r in records:
        job = jobs[r.attrs["job_id"]]
        assert sorted(expand_nodelist(job["NodeList"])) == ["node1", "node2"], jobs
        assert job["State"] == "COMPLETED"
        times = [r.attrs[f"scheduler_{k}_at"] for k in ("submitted", "started", "ended")]
        assert times == [parse_slurm_time(job[k]) for k in ("Submit", "Start", "End")]
        assert times == sorted(times)
        trial_dir = Path(r.attrs["trial_dir"])
        assert r.attrs["rank_logs"] == [str(trial_dir / "rank0.log"), str(trial_dir / "rank1.log")]
        for log in r.attrs["rank_logs"]:  # one task per node, each with its own complete log
            assert Path(log).read_text().count("completed step") == 15


# -- 2. cancelled and hung trials ----------------------------------------------------------------------------------
def test_cancelled_and_hung_trials_are_recorded(slurm_cluster: set[str], tmp_path: Path) -> None:
    space = write_space(tmp_path, f"""
        name: cancelling
        baseline: {{env: {{FLAGOPT_DEPLOYED: "1"}}}}  # something deployed, so wave 1 is both baselines
        command: {FAULTY}
        timeout_min: 1
        executor: {{kind: slurm, slurm: {{nodelist: node3}}}}
        failures: {{hang_min: 0.05}}
        profiles:
          hang: {{args: {{scenario: hang, after: 3}}}}
          long: {{args: {{steps: 100000, step_s: 0.2}}}}
        stop: {{max_trials: 5, max_null: 100}}
        noise: {{baseline_every: 100}}
    """)
    storage = storage_of(tmp_path)
    cancelled: list[str] = []

    def cancel_long_once_it_steps() -> None:
        def running_long() -> str | None:
            for attrs in trial_attrs(storage, "cancelling"):
                log = Path(attrs.get("trial_dir", "/nonexistent")) / "rank0.log"
                if attrs.get("profile") == "long" and attrs.get("job_id") and log.exists() \
                        and "completed step" in log.read_text():
                    return str(attrs["job_id"])
            return None

        job_id = str(wait_until(running_long, 120, "the long trial to run"))
        subprocess.run(["scancel", job_id], check=True)
        cancelled.append(job_id)

    watcher = Watcher(cancel_long_once_it_steps)
    watcher.start()
    assert run(space, storage) == 0
    watcher.join_checked()

    groups = by_profile(history(load_study(storage, "cancelling")))
    (long,) = groups["long"]  # cancelled on purpose: recorded once, never retried
    assert long.attrs["job_id"] == cancelled[0]
    assert long.status == "cancelled" and long.attrs["failure_class"] == "cancelled"
    assert long.attrs["job_state"] == "CANCELLED"
    assert sacct_jobs(cancelled)[cancelled[0]]["State"].startswith("CANCELLED")

    hang = groups["hang"]  # the watchdog's kill is an infrastructure flake: retried once, linked
    assert [r.status for r in hang] == ["flake", "flake"]
    assert all(r.attrs["failure_class"] == "hang" and r.attrs["killed_by"] == "hang" for r in hang)
    assert hang[1].attrs["retry_of"] == hang[0].number
    assert all(r.attrs["job_state"] == "FINISHED" for r in hang)  # the runner ended the trial, not Slurm


# -- 3. Slurm's time limit -----------------------------------------------------------------------------------------
def test_trial_over_slurms_time_limit_is_a_time_limit_failure(slurm_cluster: set[str], tmp_path: Path) -> None:
    # The trial's own timeout (5 min) is past Slurm's 1-minute limit, so Slurm ends it (it checks every 30 s), and
    # before step 14: a trial killed after its measurement window would count as a success.
    space = write_space(tmp_path, """
        name: limited
        command: ["{python}", "-m", "flagopt.workloads.faulty", "steps=100000", "step_s=8"]
        timeout_min: 5
        executor: {kind: slurm, slurm: {nodelist: node4, time: 1}}
    """)
    storage = storage_of(tmp_path)
    assert run(space, storage, "--trials", "1") == 1  # the only run failed: nothing was measured (issue 23 point 5)
    (record,) = history(load_study(storage, "limited"))
    assert record.status == "failed" and record.attrs["failure_class"] == "time-limit"
    assert record.attrs["job_state"] == "TIMEOUT"
    assert sacct_jobs([record.attrs["job_id"]])[record.attrs["job_id"]]["State"] == "TIMEOUT"
    assert record.attrs["scheduler_ended_at"] - record.attrs["scheduler_started_at"] >= 60


# -- 4. a pinned node lost mid-study -------------------------------------------------------------------------------
def test_pinned_node_down_mid_study_stops_with_a_report(slurm_cluster: set[str], tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    space = write_space(tmp_path, """
        name: lost-node
        baseline: {env: {FLAGOPT_DEPLOYED: "1"}}  # something deployed, so wave 1 is both baselines
        command: ["{python}", "-m", "flagopt.workloads.faulty", "steps=15", "step_s=0.15"]
        executor: {kind: slurm, slurm: {nodelist: node2, pending_deadline_min: 0.5}}
        profiles:
          a: {env: {FOO: "1"}}
          b: {env: {FOO: "2"}}
        stop: {max_trials: 10, max_null: 100}
        noise: {baseline_every: 100}
    """)
    storage = storage_of(tmp_path)
    with node_set_down("node2") as down:

        def lose_node_while_the_last_trial_waits() -> None:
            # The 4th and last trial (--trials 4) queues behind the 3rd. Hold it, so that node2 is idle once the
            # 3rd ends; then take node2 down (an idle node stays down on this cluster) and let the job go.
            last = wait_until(lambda: next((a for a in trial_attrs(storage, "lost-node")
                                            if a["number"] == 3 and a.get("job_id")), None), 120, "trial 3's job")
            job_id = str(last["job_id"])  # type: ignore[index]
            subprocess.run(["scontrol", "hold", job_id], check=True, capture_output=True)
            wait_until(lambda: all(a.get("status") not in (None, "running")
                                   for a in trial_attrs(storage, "lost-node") if a["number"] < 3), 60, "trials 0-2")
            wait_until(lambda: node_states("node2")["node2"] == "idle", 30, "node2 to be idle")
            down()
            subprocess.run(["scontrol", "release", job_id], check=True)

        watcher = Watcher(lose_node_while_the_last_trial_waits)
        watcher.start()
        code = run(space, storage, "--trials", "4")
        watcher.join_checked()
        out, err = capsys.readouterr()
        assert node_states("node2")["node2"].startswith("down")  # the stop came from the down node, not a resume

    assert code != 0
    (line,) = err.strip().splitlines()  # one line that names the node and its state
    assert "node2 is down" in line and "flagopt-test" in line
    study = load_study(storage, "lost-node")
    verdict = study.user_attrs["flagopt.verdict"]
    assert verdict["reason"] == "node-down" and verdict["message"].startswith("stopped: ")
    assert "node2 is down" in verdict["message"]
    assert "node-down" in out and "baseline-deployed" in out  # the leaderboard so far, printed with the verdict

    records = history(study)
    assert [r.status for r in records] == ["ok", "ok", "ok", "cancelled"]
    jobs = sacct_jobs([r.attrs["job_id"] for r in records])
    assert {jobs[r.attrs["job_id"]]["NodeList"] for r in records[:3]} == {"node2"}
    last = jobs[records[3].attrs["job_id"]]  # never moved to another node: it never ran
    assert last["State"].startswith("CANCELLED") and last["Start"] in ("None", "Unknown")


# -- 5. an unknown node --------------------------------------------------------------------------------------------
def test_unknown_nodelist_fails_at_once_with_slurms_message(slurm_cluster: set[str], tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    space = write_space(tmp_path, f"""
        name: nowhere
        command: {FAULTY}
        executor: {{kind: slurm, slurm: {{nodelist: node1}}}}
    """)
    assert run(space, storage_of(tmp_path), "--nodelist", "node9") != 0
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "Node node9 not found" in line  # Slurm's own words
    assert sorted(p.name for p in tmp_path.iterdir()) == ["space.yaml"]  # no storage, no study folder, no job


# -- 6. a changed nodelist on resume -------------------------------------------------------------------------------
def test_changed_nodelist_is_refused_unless_rebaselined(slurm_cluster: set[str], tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    space = write_space(tmp_path, f"""
        name: moved
        baseline: {{env: {{FLAGOPT_DEPLOYED: "1"}}}}  # something deployed, so wave 1 is both baselines
        command: {FAULTY}
        executor: {{kind: slurm, slurm: {{nodelist: node3}}}}
        profiles:
          fast: {{args: {{tokens_per_s: 51000}}}}
        stop: {{max_trials: 3, max_null: 100}}
        noise: {{baseline_every: 100}}
    """)
    storage = storage_of(tmp_path)
    assert run(space, storage) == 0
    first = history(load_study(storage, "moved"))
    assert len(first) == 3
    capsys.readouterr()

    assert run(space, storage, "--nodelist", "node4") != 0
    first_line, *diff, ways = capsys.readouterr().err.strip().splitlines()
    assert first_line.endswith("study 'moved' has 3 runs of another setup; these changes make them incomparable:")
    assert diff == ['  executor.slurm.nodelist: "node3" -> "node4"'] and "--rebaseline" in ways
    assert len(history(load_study(storage, "moved"))) == 3  # nothing ran

    assert run(space, storage, "--nodelist", "node4", "--rebaseline") == 0
    study = load_study(storage, "moved")
    assert study.user_attrs["flagopt.epoch"] == 1
    assert study.user_attrs["flagopt.executor"]["nodelist"] == "node4"
    new = [r for r in history(study) if r.number > first[-1].number]
    # new baselines first, and the profile measured again: the old epoch's runs count for nothing here
    assert [r.kind for r in new] == ["baseline-deployed", "baseline-no-env", "profile"]
    assert all(r.attrs["epoch"] == 1 and r.status == "ok" for r in new)
    assert all(r.attrs["epoch"] == 0 for r in history(study) if r.number <= first[-1].number)
    jobs = sacct_jobs([r.attrs["job_id"] for r in new])
    assert {job["NodeList"] for job in jobs.values()} == {"node4"}
    arms = {arm["label"]: arm for arm in study.user_attrs["flagopt.arms"]}
    assert arms["fast"]["trial"] == new[2].number and arms["fast"]["runs"] == 1
    assert min(arm["trial"] for arm in arms.values()) > first[-1].number
    # Readers see the new epoch only: the leaderboard row of `fast` is its new trial, one run.
    capsys.readouterr()
    assert main(["leaderboard", "moved", "--storage", storage, "--json"]) == 0
    rows = {row["profile"]: row for row in json.loads(capsys.readouterr().out)["rows"]}
    assert rows["fast"]["trial"] == new[2].number and rows["fast"]["runs"] == 1
