"""The verbs users of Optuna's CLI and sweep tools expect: list, delete and compare studies; JSON from status and
leaderboard; an example in every verb's --help."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import optuna
import pytest

from flagopt.cli import VERBS, build_parser, main
from flagopt.study import load_study, study_folder
from tests.cli.conftest import space_writer

SPACE = """
    name: {name}
    model_tag: toy
    parallelism: {parallelism}
    command: ["{{python}}", "-m", "flagopt.workloads.faulty", "steps=15", "step_s=0.003", "tokens_per_s={tps}"]
    profiles:
      shared: {{env: {{NCCL_PROTO: LL128}}}}
      faster: {{args: {{tokens_per_s: {faster}}}}}
    screen: false
    stop: {{max_trials: 5}}
"""


def make(write_space, storage, name, parallelism, tps=50000, faster=60000):
    space = write_space(SPACE.format(name=name, parallelism=parallelism, tps=tps, faster=faster), name=f"{name}.yaml")
    assert main(["run", "--space", str(space), "--storage", storage, "--no-preflight", "--quiet"]) == 0


@pytest.fixture(scope="module")
def two_built(tmp_path_factory) -> Path:
    """The two studies, run once for the module (the tests only read them, or change a copy)."""
    base = tmp_path_factory.mktemp("two")
    storage = f"sqlite:///{base}/studies/flagopt.db"
    make(space_writer(base), storage, "toy-pp2", "PP=2")
    make(space_writer(base), storage, "toy-fsdp", "FSDP=8", tps=40000, faster=40000)
    return base / "studies"


@pytest.fixture
def two(two_built, tmp_path):
    """A test's own copy of the two studies (the storage and the study folders beside it, which delete removes)."""
    shutil.copytree(two_built, tmp_path / "studies")
    return f"sqlite:///{tmp_path}/studies/flagopt.db"


def test_studies_lists_each_with_verdict_runs_and_best(two, capsys):
    capsys.readouterr()
    assert main(["studies", "--storage", two, "--json"]) == 0
    lines = {line["name"]: line for line in json.loads(capsys.readouterr().out)}
    assert set(lines) == {"toy-fsdp", "toy-pp2"}
    pp2 = lines["toy-pp2"]
    assert pp2["parallelism"] == "PP=2" and pp2["runs"] == 5 and pp2["verdict"] == "win"
    assert pp2["best"].startswith("faster +") and pp2["best"].endswith("(confirmed)")
    # toy-fsdp's `faster` profile changes nothing: the budget verdict recommends nothing, and the listing says so
    # instead of showing its best arm's noise as a claim
    assert lines["toy-fsdp"]["verdict"] == "budget" and lines["toy-fsdp"]["best"] == "none recommended"
    assert main(["studies", "--storage", two]) == 0
    text = capsys.readouterr().out
    assert "toy-fsdp" in text and "toy-pp2" in text and "budget" in text and "win" in text


def test_compare_matches_settings_across_two_studies(two, capsys):
    capsys.readouterr()
    assert main(["compare", "toy-pp2", "toy-fsdp", "--storage", two, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["a"]["study"] == "toy-pp2" and out["a"]["verdict"]["reason"] == "win"
    rows = {r["settings"]: r for r in out["rows"]}
    # `faster` sets tokens_per_s=60000 in one study and 40000 in the other: two settings, each tried in one
    assert rows["tokens_per_s=60000"]["a"]["gain"] > 0.1 and rows["tokens_per_s=60000"]["b"] is None
    assert rows["tokens_per_s=40000"]["a"] is None and rows["tokens_per_s=40000"]["b"] is not None
    assert out["rows"][0]["settings"] == "NCCL_PROTO=LL128"  # the one setting in both comes first
    assert out["rows"][0]["a"]["runs"] >= 1 and out["rows"][0]["b"]["runs"] >= 1
    assert main(["compare", "toy-pp2", "toy-fsdp", "--storage", two]) == 0
    text = capsys.readouterr().out
    assert "toy-pp2 (PP=2)" in text and "not tried" in text and "toy-pp2: verdict (win)" in text


def test_status_and_leaderboard_json_carry_the_verdict(two, capsys):
    capsys.readouterr()
    assert main(["status", "toy-pp2", "--storage", two, "--json"]) == 0
    st = json.loads(capsys.readouterr().out)
    assert st["study"] == "toy-pp2" and st["counts"] == {"ok": 5} and st["running"] == []
    assert st["verdict"]["reason"] == "win" and st["best"].startswith("faster")
    assert main(["leaderboard", "toy-pp2", "--storage", two, "--json"]) == 0
    board = json.loads(capsys.readouterr().out)
    assert board["study"] == "toy-pp2" and board["verdict"]["reason"] == "win"
    assert {r["profile"] for r in board["rows"]} >= {"baseline-deployed", "faster"}


def test_delete_removes_the_study_and_its_folder_and_asks_first(two, capsys, monkeypatch):
    folder = study_folder(two, "toy-pp2")
    assert (folder / "trials" / "0").is_dir()
    capsys.readouterr()
    # not a terminal: refused without --yes, nothing deleted
    monkeypatch.setattr("sys.stdin", io.StringIO("y\n"))
    assert main(["delete", "toy-pp2", "--storage", two]) == 2
    assert "pass --yes" in capsys.readouterr().err and folder.exists()
    load_study(two, "toy-pp2")
    # a terminal that answers no
    tty = io.StringIO("n\n")
    tty.isatty = lambda: True
    monkeypatch.setattr("sys.stdin", tty)
    assert main(["delete", "toy-pp2", "--storage", two]) == 1 and folder.exists()
    assert main(["delete", "toy-pp2", "--storage", two, "--yes"]) == 0
    assert "deleted study 'toy-pp2' (5 trials)" in capsys.readouterr().err
    assert not folder.exists()
    names = [s.study_name for s in optuna.get_all_study_summaries(two)]
    assert names == ["toy-fsdp"] and study_folder(two, "toy-fsdp").exists()
    assert main(["delete", "toy-pp2", "--storage", two, "--yes"]) == 1
    assert "no such study (studies in this storage: toy-fsdp)" in capsys.readouterr().err


def test_delete_is_refused_while_a_driver_holds_the_study(two, capsys):
    from flagopt.study._driver_lock import driver_lock  # the driver's own lock (a row in the storage), held as a driver holds it
    with driver_lock(two, study_folder(two, "toy-fsdp"), "toy-fsdp") as lock:
        lock.acquire()
        assert main(["delete", "toy-fsdp", "--storage", two, "--yes"]) == 1
    err = capsys.readouterr().err
    assert "another driver runs this study" in err and "nothing was deleted" in err and "--force" not in err
    load_study(two, "toy-fsdp")


def test_every_verb_help_has_an_example(capsys):
    sub = next(a for a in build_parser()._actions if a.dest == "verb")
    assert len(sub.choices) == len(VERBS)
    for name, parser in sub.choices.items():
        text = parser.format_help()
        assert "example" in text and f"python -m flagopt {name}" in text, name


def test_a_study_recreated_after_optuna_delete_study_sets_the_old_trials_aside(write_space, storage, capsys):
    """`optuna delete-study` leaves studies/<name>/: a new study of that name used to write trials/0-1 over the old
    ones and keep the old trials/2-4 beside them."""
    make(write_space, storage, "again", "PP=2")
    folder = study_folder(storage, "again")
    old = sorted(p.name for p in (folder / "trials").iterdir())
    assert len(old) == 5
    optuna.delete_study(study_name="again", storage=storage)
    capsys.readouterr()
    space = write_space(SPACE.format(name="again", parallelism="PP=2", tps=50000, faster=60000)
                        .replace("max_trials: 5", "max_trials: 2"), name="again2.yaml")
    assert main(["run", "--space", str(space), "--storage", storage, "--no-preflight"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "deleted outside flagopt left trial folders here: moved to" in out
    assert sorted(p.name for p in (folder / "trials").iterdir()) == ["0", "1"]
    (aside,) = folder.glob("stale-*")
    assert sorted(p.name for p in (aside / "trials").iterdir()) == old
    # a resume never moves anything
    assert main(["run", "--space", str(space), "--storage", storage, "--no-preflight", "--trials", "1"]) == 0
    assert len(list(folder.glob("stale-*"))) == 1 and (folder / "trials" / "0").exists()
