"""benchmarks/rough_landscapes.py: peers of the shipped landscapes with stragglers and a level shift."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks._named_landscapes import named_landscapes
from benchmarks.rough_landscapes import main
from flagopt.workloads.sim import load_landscape


def test_peers_keep_their_landscape_s_truth_and_add_the_roughness(tmp_path: Path) -> None:
    path = tmp_path / "rough.yaml"
    assert main([str(path), "--landscapes", "win10", "null", "--straggler", "0.1", "--shift", "-0.02"]) == 0
    names, nulls = named_landscapes(path, None)  # what decisions.py --landscape-file reads
    assert names == ["win10-strag", "win10-shift", "null-strag", "null-shift"]
    assert nulls == {"null-strag", "null-shift"}
    shipped = load_landscape("win10")
    for name in ("win10-strag", "win10-shift"):
        peer = load_landscape(name, path)
        assert peer.best() == shipped.best() and peer.params.keys() == shipped.params.keys()
    assert load_landscape("win10-strag", path).noise["straggler"] == 0.1
    shifted = load_landscape("win10-shift", path)
    assert shifted.drift(30) - shipped.drift(30) == pytest.approx(-0.02)


def test_an_unknown_landscape_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="no shipped landscape nope"):
        main([str(tmp_path / "rough.yaml"), "--landscapes", "nope"])
    assert not (tmp_path / "rough.yaml").exists()
