"""slots.py end to end on one seed: the write-up has its columns, and two slots decide in less wall time than one."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.slots import COLUMNS, load_results, main, offsets_of, parse_args, run_task, tasks_of


def _table(text: str) -> list[dict[str, str]]:
    """The results table of the write-up as rows keyed by column."""
    lines = [line for line in text.splitlines() if line.startswith("| ")]
    header = next(line for line in lines if line.startswith("| landscape | slots |"))
    names = [cell.strip() for cell in header.strip("|").split("|")]
    start = lines.index(header) + 1
    body = []
    for line in lines[start:]:
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        if len(cells) != len(names):
            break
        body.append(dict(zip(names, cells)))
    return body


def test_one_seed_on_one_and_two_slots(tmp_path: Path) -> None:
    out, saved = tmp_path / "slots.md", tmp_path / "slots.json"
    out.write_text("old\n<!-- notes -->\nkept by hand\n<!-- /notes -->\n")
    code = main(["--seeds", "1", "--landscapes", "win10", "--families", "--cells", "1", "2:alt", "2:slow-first",
                 "--jobs", "1", "--out", str(out), "--results", str(saved)])
    assert code == 0
    text = out.read_text()
    rows = _table(text)
    assert list(rows[0]) == list(COLUMNS)
    assert [(r["landscape"], r["slots"], r["offsets"]) for r in rows] == \
        [("win10", "1", "one"), ("win10", "2", "alt"), ("win10", "2", "slow-first")]
    assert "kept by hand" in text and "## Targets" in text and "## Every false winner" in text

    results, meta = load_results(saved)
    wall = {(r.slots, r.offset): r.wall_seconds for r in results}
    launches = {(r.slots, r.offset): r.result.runs for r in results}
    # two slots run launches side by side: less wall time per launch (the two studies may decide after different
    # numbers of runs, so their whole wall times need not compare)
    assert 0 < wall[(2, "alt")] / launches[(2, "alt")] < wall[(1, "one")] / launches[(1, "one")]
    two = next(r for r in results if r.offset == "alt")
    assert set(two.launches_per_slot) and min(two.launches_per_slot) > 0  # both slots ran trials
    assert meta["command"].startswith("`python benchmarks/slots.py --seeds 1")

    again = tmp_path / "again.md"
    assert main(["--from-results", str(saved), "--out", str(again)]) == 0
    assert _table(again.read_text()) == rows
    assert main(["--from-results", str(saved), str(saved), "--out", str(again)]) == 0  # two runs in one write-up
    assert [r["seeds"] for r in _table(again.read_text())] == ["2", "2", "2"]


def test_offsets_and_bad_arguments() -> None:
    speed, phase = offsets_of("alt", 4, 0.97, 7.0)
    assert speed == {"slot0": 1.0, "slot1": 0.97, "slot2": 1.0, "slot3": 0.97}
    assert phase == {"slot0": 0.0, "slot1": 7.0, "slot2": 14.0, "slot3": 21.0}
    assert offsets_of("slow-first", 2, 0.97, 7.0)[0] == {"slot0": 0.97, "slot1": 1.0}
    assert parse_args(["--cells", "1", "4:alt"]).cells == [(1, "one"), (4, "alt")]
    assert parse_args(["--quick"]).landscapes == ["win10", "null"]
    for bad in (["--slots", "2", "4"], ["--cells", "1", "4:fast"], ["--cells", "1:alt"], ["--slow", "1.5"]):
        with pytest.raises(SystemExit) as exc:
            parse_args(bad)
        assert exc.value.code == 2


def test_landscapes_of_ones_own_file(tmp_path: Path) -> None:
    """--landscape-file: the held-out shapes on several slots; a null one takes --null-seeds, no family unless named."""
    stress = Path(__file__).resolve().parents[2] / "benchmarks" / "stress_landscapes.yaml"
    args = parse_args(["--landscape-file", str(stress), "--landscapes", "stress-cat-pair", "stress-null-wide",
                       "--seeds", "2", "--null-seeds", "3", "--cells", "1", "2:alt"])
    assert args.landscapes == ["stress-cat-pair", "stress-null-wide"] and args.families == []
    tasks = tasks_of(args)
    assert {(t.name, t.landscape_file) for t in tasks} == {("stress-cat-pair", str(stress)),
                                                           ("stress-null-wide", str(stress))}
    assert sum(1 for t in tasks if t.name == "stress-null-wide") == 3 * 2  # --null-seeds, on each cell
    result = run_task(next(t for t in tasks if t.name == "stress-cat-pair" and t.slots == 2), str(tmp_path))
    assert result.result.landscape == "stress-cat-pair" and min(result.launches_per_slot) > 0
    for bad in (["--landscape-file", str(stress), "--landscapes", "win10"],
                ["--landscape-file", str(tmp_path / "missing.yaml")]):
        with pytest.raises(SystemExit) as exc:
            parse_args(bad)
        assert exc.value.code == 2
