"""decisions.py end to end on one seed: every strategy runs, the write-up carries every section and keeps notes."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from benchmarks._metrics import landscape_kind
from benchmarks._named_landscapes import named_landscapes
from benchmarks.decisions import main, parse_args
from flagopt.workloads.sim import load_landscape


def test_quick_means_flagopt_alone_on_the_shipped_landscapes() -> None:
    args = parse_args(["--quick"])
    assert args.strategies == ["flagopt"] and args.seeds == 3 and args.families == []
    assert "ppmb" in args.landscapes and "flaky" in args.landscapes
    assert parse_args(["--quick", "--seeds", "5"]).seeds == 5
    args = parse_args(["--seeds", "30", "--null-seeds", "50"])
    assert (args.seeds, args.held_out_seeds, args.null_seeds) == (30, 30, 50)


def test_one_seed_of_every_strategy_writes_the_write_up(tmp_path: Path) -> None:
    out = tmp_path / "bench.md"
    out.write_text("old\n<!-- notes -->\nkept by hand\n<!-- /notes -->\n")
    code = main(["--seeds", "1", "--landscapes", "pair", "--families", "rand-below", "--jobs", "1",
                 "--max-trials", "30", "--out", str(out)])
    assert code == 0
    text = out.read_text()
    optional = ("skopt",) if importlib.util.find_spec("skopt") else ()  # the `bench` extra
    if not optional:
        assert "scikit-optimize is not installed" in text
    for strategy in ("flagopt", "flagopt-eq", "flagopt-1.5x", "manual", "manual-x3", "random", "tpe", "tpe-repeats",
                     *optional):
        assert f"| pair | {strategy} |" in text and f"| rand-below | {strategy} |" in text
    assert "## Results: held-out random landscapes" in text and "## Targets (issue 25)" in text
    assert "pair: win verdict" in text and "kept by hand" in text


def test_flagopt_eq_is_held_to_the_manual_protocols_launches(tmp_path: Path) -> None:
    """The equal-budget strategy: flagopt with stop.max_trials = the manual protocol's launches on the same seed."""
    out = tmp_path / "bench.json"
    code = main(["--seeds", "1", "--first-seed", "3", "--landscapes", "win10", "--families", "--jobs", "1",
                 "--strategies", "flagopt", "flagopt-eq", "manual", "--json", str(out),
                 "--out", str(tmp_path / "bench.md")])
    assert code == 0
    runs = {r["strategy"]: r["runs"] for r in json.loads(out.read_text())}
    assert runs["flagopt-eq"] <= runs["manual"] < runs["flagopt"]


def test_results_of_another_run_join_the_write_up(tmp_path: Path, capsys) -> None:
    """One benchmark split across two machines: the second run's write-up holds the first run's strategy too."""
    first = tmp_path / "first.json"
    assert main(["--seeds", "1", "--landscapes", "pair", "--families", "--jobs", "1", "--strategies", "manual",
                 "--json", str(first)]) == 0
    out, both = tmp_path / "bench.md", tmp_path / "both.json"
    assert main(["--seeds", "1", "--landscapes", "pair", "--families", "--jobs", "1", "--strategies", "manual-x3",
                 "--add-results", str(first), "--json", str(both), "--out", str(out)]) == 0
    text = out.read_text()
    assert "| pair | manual |" in text and "| pair | manual-x3 |" in text
    assert sorted(r["strategy"] for r in json.loads(both.read_text())) == ["manual", "manual-x3"]
    with pytest.raises(SystemExit, match="manual on pair seed 0 was also run now"):
        main(["--seeds", "1", "--landscapes", "pair", "--families", "--jobs", "1", "--strategies", "manual",
              "--add-results", str(first)])
    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(SystemExit, match="bad.json: not a decisions.py --json file"):
        main(["--landscapes", "pair", "--strategies", "manual", "--add-results", str(tmp_path / "bad.json")])


def test_flagopt_told_confirms_the_true_best_as_its_one_profile(tmp_path: Path) -> None:
    """The bound for the confirmation alone: told the answer, the study races it against the deployed job."""
    from benchmarks.decisions import told_space
    from flagopt.workloads.sim import load_landscape

    assert told_space(load_landscape("null")) is None  # nothing to tell: the deployed job is the best
    out = tmp_path / "bench.json"
    code = main(["--seeds", "1", "--landscapes", "win10", "null", "--families", "--jobs", "1",
                 "--strategies", "flagopt-told", "--json", str(out), "--out", str(tmp_path / "bench.md")])
    assert code == 0
    rows = json.loads(out.read_text())
    assert [r["landscape"] for r in rows] == ["win10"]
    (told,) = rows
    assert told["verdict"] == "win" and told["within_1pct"] and told["runs"] <= 15
    assert "flagopt-told skipped on null" in (tmp_path / "bench.md").read_text()


def test_stop_rules_other_than_the_defaults_reach_every_flagopt_study(tmp_path: Path) -> None:
    """``--stop refine=0``: the study ends at its first confirmed winner, in fewer runs than with the default."""
    assert parse_args(["--stop", "refine=0", "win=0.04"]).stop == [("refine", 0), ("win", 0.04)]
    for bad in ("refine", "refin=3", "max_trials=30", "refine=ten", "refine=-1", "max_null=0"):
        with pytest.raises(SystemExit):
            parse_args(["--stop", bad])
    runs = {}
    for name, extra in (("default", []), ("first", ["--stop", "refine=0"])):
        out = tmp_path / f"{name}.json"
        assert main(["--seeds", "1", "--first-seed", "3", "--landscapes", "win10", "--families", "--jobs", "1",
                     "--strategies", "flagopt", "--json", str(out), *extra]) == 0
        (row,) = json.loads(out.read_text())
        assert row["verdict"] == "win"
        runs[name] = row["runs"]
    assert runs["first"] < runs["default"]


def _own_file(tmp_path: Path) -> Path:
    """A landscapes file of one's own: the shipped win10 and null under names the shipped file does not have."""
    import yaml

    from flagopt.workloads.sim import LANDSCAPES

    shipped = yaml.safe_load(LANDSCAPES.read_text())
    path = tmp_path / "my jobs.yaml"  # a space in the path: it reaches the job as one argument
    path.write_text(yaml.safe_dump({"mine": shipped["win10"], "quiet": shipped["null"]}, sort_keys=False))
    return path


def test_a_landscapes_file_of_ones_own_runs_against_the_manual_protocol(tmp_path: Path) -> None:
    """``--landscape-file``: its landscapes run like shipped ones (the job reads them from that file: the shipped
    file has no ``mine``), a landscape whose true best is the deployed job takes ``--null-seeds``, and the write-up
    names the file."""
    path = _own_file(tmp_path)
    out = tmp_path / "bench.json"
    md = tmp_path / "bench.md"
    assert parse_args(["--landscape-file", str(path)]).families == []  # your own landscapes alone by default
    assert parse_args(["--landscape-file", str(path), "--families", "rand-win"]).families == ["rand-win"]
    code = main(["--landscape-file", str(path), "--seeds", "1", "--null-seeds", "2", "--jobs", "1",
                 "--strategies", "flagopt", "manual", "--max-trials", "30", "--json", str(out), "--out", str(md)])
    assert code == 0
    rows = json.loads(out.read_text())
    seeds = {(r["landscape"], r["strategy"]): [] for r in rows}
    for r in rows:
        seeds[(r["landscape"], r["strategy"])].append(r["seed"])
    assert seeds == {("mine", "flagopt"): [0], ("mine", "manual"): [0], ("quiet", "flagopt"): [0, 1],
                     ("quiet", "manual"): [0, 1]}
    mine = next(r for r in rows if r["landscape"] == "mine" and r["strategy"] == "flagopt")
    assert mine["runs"] > 2 and mine["verdict"] in ("win", "budget") and mine["best_gain"] > 0.10
    text = md.read_text()
    assert f"truth model ({path})" in text and f"## Results: landscapes of {path}" in text
    assert "mine: win verdict" in text and "quiet: null verdict within the budget" in text


@pytest.mark.parametrize("content, names, said", [
    (None, [], "cannot read it: No such file"),  # None: no file there
    ("- a\n- b\n", [], "landscapes: a mapping of landscape names"),
    ("mine:\n  description: x\n", [], "mine: not a landscape entry: missing key 'params'"),
    ("mine: [\n", [], "not valid YAML"),
    ("", ["--landscapes", "win10"], "landscapes: no landscape 'win10' in this file; it has mine, quiet"),  # "": valid
])
def test_a_bad_landscapes_file_is_one_clear_error_before_any_study(tmp_path: Path, capsys, content, names,
                                                                  said) -> None:
    path = _own_file(tmp_path)
    if content is None:
        path.unlink()
    elif content:
        path.write_text(content)
    with pytest.raises(SystemExit) as exc:
        parse_args(["--landscape-file", str(path), *names])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert f"--landscape-file: {path}: " in err and said in err


def test_a_landscape_name_not_shipped_needs_the_file_it_is_in(capsys) -> None:
    with pytest.raises(SystemExit):
        parse_args(["--landscapes", "mine"])
    assert "unknown 'mine'" in capsys.readouterr().err


def test_the_stress_landscapes_are_what_their_file_says() -> None:
    """benchmarks/stress_landscapes.yaml: shapes the shipped landscapes and the random families lack, each of the
    kind (and width) its header and docs/benchmark-decisions.md say, so the figures written there stay about them."""
    stress = Path(__file__).resolve().parents[2] / "benchmarks/stress_landscapes.yaml"
    names, nulls = named_landscapes(stress, None)
    kinds = {name: landscape_kind(load_landscape(name, stress).best().gain) for name in names}
    assert kinds == {"stress-wide": "win", "stress-lownoise": "win", "stress-noisy": "win", "stress-revert": "win",
                     "stress-mb-oom": "win", "stress-below-wide": "below", "stress-null-wide": "null",
                     "stress-unknown-range": "win", "stress-huge": "win", "stress-combo-oom": "win",
                     "stress-cat-pair": "win", "stress-hidden-pair": "win", "stress-winner-pair": "win",
                     "stress-costly-mask": "win", "stress-recipe-partner": "win", "stress-conflict": "win",
                     "stress-row-conflict": "win", "stress-fsdp-pool": "win", "stress-tp-pair": "win",
                     "stress-below-three": "below", "stress-pp-mb-pair": "win", "stress-recipe-pool": "win",
                     "stress-null-shift": "null", "stress-flaky-cliff": "win", "stress-cliff-off-grid": "win",
                     "stress-remat-batch": "win", "stress-remat-batch-stated": "win", "stress-rs-company": "win",
                     "stress-pp-mb-unstated": "win"}
    assert nulls == {"stress-null-wide", "stress-null-shift"}
    widths = {name: len(load_landscape(name, stress).space_params()) for name in names}
    assert widths["stress-wide"] == 12 and widths["stress-below-wide"] == 10 and widths["stress-null-wide"] == 11
    assert widths["stress-huge"] == 20
    # the pair that fails together: each runs alone, both from 1 GiB up do not; the true best sets both below it
    combo = load_landscape("stress-combo-oom", stress)
    best = combo.best().settings
    assert best["xla_gpu_enable_pipelined_all_gather"] is True
    assert best["xla_gpu_all_gather_combine_threshold_bytes"] < 2**30
    # the categorical pair: its halves are small alone (the protocol costs), together they are most of the best
    pair = load_landscape("stress-cat-pair", stress)
    assert pair.best().settings["NCCL_ALGO"] == "Tree" and pair.best().settings["NCCL_PROTO"] == "Simple"
    assert pair.true_gain({"NCCL_PROTO": "Simple"}) < 0 < pair.true_gain({"NCCL_ALGO": "Tree"}) < 0.01
    assert pair.true_gain({"NCCL_ALGO": "Tree", "NCCL_PROTO": "Simple"}) > 0.07
    # the hidden pair: neither half helps alone (double buffering costs), the rest stays under the null bar
    hidden = load_landscape("stress-hidden-pair", stress)
    db = {"xla_gpu_enable_while_loop_double_buffering": True}
    assert hidden.true_gain(db) < 0 and abs(hidden.true_gain({"NCCL_PROTO": "LL128"})) < 1e-9
    assert hidden.true_gain({**db, "NCCL_PROTO": "LL128"}) > 0.07
    assert hidden.true_gain({**hidden.best().settings, **db, "NCCL_PROTO": None}) < 0.03
    # the pair beside a winner: p2p costs alone, and without it the best misses a third of its gain
    beside = load_landscape("stress-winner-pair", stress)
    p2p = {"xla_gpu_enable_pipelined_p2p": True}
    assert beside.true_gain(p2p) < 0 and beside.true_gain({"num_pipeline_microbatches": 16}) > 0.05
    assert beside.best().settings["NCCL_PROTO"] == "Simple" and beside.best().settings["xla_gpu_enable_pipelined_p2p"]
    without = {**beside.best().settings, "xla_gpu_enable_pipelined_p2p": False}
    assert beside.true_gain(without) < beside.best().gain - 0.03
    # the costly mask: the scheduler off costs three times the win bar; the pair is nothing alone, the best together
    mask = load_landscape("stress-costly-mask", stress)
    pag = {"xla_gpu_enable_pipelined_all_gather": True}
    assert mask.true_gain({"xla_gpu_enable_latency_hiding_scheduler": False}) < -0.14
    assert abs(mask.true_gain(pag)) < 1e-9 and abs(mask.true_gain({"NCCL_PROTO": "LL128"})) < 1e-9
    assert mask.true_gain({**pag, "NCCL_PROTO": "LL128"}) > 0.07
    assert mask.true_gain({**pag, "NCCL_PROTO": "LL128", "xla_gpu_enable_latency_hiding_scheduler": False}) < 0
    # the recipe's partner: Tree costs alone and pays beside the recipe's own flags, which the space does not offer
    partner = load_landscape("stress-recipe-partner", stress)
    recipe = {"xla": {"xla_gpu_enable_triton_gemm": False, "xla_gpu_enable_cudnn_fmha": True}}
    assert partner.true_gain({"NCCL_ALGO": "Tree"}) < -0.015 and abs(partner.true_gain(recipe)) < 0.01
    assert partner.true_gain({"xla": {**recipe["xla"]}, "env": {"NCCL_ALGO": "Tree"}}) > 0.08
    assert partner.best().settings["NCCL_ALGO"] == "Tree" and "xla_gpu_enable_triton_gemm" not in \
        set(partner.space_params())
    # the conflict: two settings near the bar alone spoil each other; the best keeps one of them
    conflict = load_landscape("stress-conflict", stress)
    pag, p2p = {"xla_gpu_enable_pipelined_all_gather": True}, {"xla_gpu_enable_pipelined_p2p": True}
    assert min(conflict.true_gain(pag), conflict.true_gain(p2p)) > 0.04
    assert conflict.true_gain({**pag, **p2p, "NCCL_ALGO": "Ring"}) < 0 < 0.075 < conflict.best().gain
    assert conflict.best().settings["xla_gpu_enable_pipelined_p2p"] is False
    unknown = load_landscape("stress-unknown-range", stress)
    # its true best leaves the unknown flag as deployed: no run can set it, whatever effect the file gives it
    assert unknown.best().settings["xla_gpu_memory_limit_slop_factor"] == 95 < 110
    lownoise = load_landscape("stress-lownoise", stress)
    assert lownoise.noise["run"] <= 0.002 and max(lownoise.true_gain({n: v}) for n, p in lownoise.params.items()
                                                  for v in p.candidates()) < 0.02  # no single setting near the bar
    # the below job of three small settings: none reaches the 2 % null bar alone, together they are +3.4 %
    three = load_landscape("stress-below-three", stress)
    parts = {"xla_gpu_enable_pipelined_all_gather": True, "xla_gpu_enable_while_loop_double_buffering": True,
             "xla_gpu_all_gather_combine_threshold_bytes": 268435456}
    assert {n: three.best().settings[n] for n in parts} == parts
    assert all(0.009 < three.true_gain({name: value}) < 0.02 for name, value in parts.items())
    assert 0.03 < three.best().gain < 0.05
    # the tensor-parallel pair: LL128 is nothing alone and adds over 4 points beside NVLS
    tp = load_landscape("stress-tp-pair", stress)
    assert abs(tp.true_gain({"NCCL_PROTO": "LL128"})) < 1e-9 and tp.best().settings["NCCL_PROTO"] == "LL128"
    assert tp.true_gain({"NCCL_ALGO": "NVLS", "NCCL_PROTO": "LL128"}) > tp.true_gain({"NCCL_ALGO": "NVLS"}) + 0.04
    # the FSDP pool: the overlap limit and pipelined all-gather hide the same communication, so together they add up
    # to less than their product alone
    pool = load_landscape("stress-fsdp-pool", stress)
    limit = {"xla_gpu_experimental_parallel_collective_overlap_limit": 2}
    pag = {"xla_gpu_enable_pipelined_all_gather": True}
    assert (1 + pool.true_gain({**limit, **pag})) < (1 + pool.true_gain(limit)) * (1 + pool.true_gain(pag)) - 0.003
    # the pipeline pair: p2p costs alone and pays only at 32 microbatches or more
    pp = load_landscape("stress-pp-mb-pair", stress)
    mb, p2p = "num_pipeline_microbatches", {"xla_gpu_enable_pipelined_p2p": True}
    assert pp.true_gain(p2p) < 0 < pp.true_gain({**p2p, mb: 32}) - pp.true_gain({mb: 32}) - 0.02
    assert pp.oom_bytes({mb: 128}) is not None and pp.best().settings["xla_gpu_enable_pipelined_p2p"] is True
    # the recipe pool: Triton GEMMs off cost alone and pay inside the recipe; the best is the recipe plus overlap 2
    rp = load_landscape("stress-recipe-pool", stress)
    own = {"xla_gpu_enable_triton_gemm": False}
    assert rp.true_gain(own) < 0 and rp.best().settings["xla_gpu_enable_triton_gemm"] is False
    assert rp.best().settings["xla_gpu_experimental_parallel_collective_overlap_limit"] == 2
    # the cliffs in company: remat off and the threshold run alone and fail together from 1 GiB (1.5 GiB off-grid);
    # the true best sets both, one byte below that cliff, on flaky infrastructure
    for name, cliff in (("stress-flaky-cliff", 2**30), ("stress-cliff-off-grid", 3 * 2**29)):
        land = load_landscape(name, stress)
        best = land.best().settings
        assert best["xla_disable_hlo_passes"] == "rematerialization" and land.flaky
        assert best["xla_gpu_all_gather_combine_threshold_bytes"] == cliff - 1
        assert land.oom_bytes({"xla_disable_hlo_passes": "rematerialization",
                               "xla_gpu_all_gather_combine_threshold_bytes": cliff}) is not None
    # a setting that pays alone and fails beside the best value of a numeric one: the true best sets it, with the
    # numeric setting one step short of that cliff (a batch of 7 below 8; a threshold one byte below 1.5 GiB)
    for name, numeric, added, cliff in (("stress-remat-batch", "per_device_batch_size", ("remat_policy", "minimal"), 8),
                                        ("stress-remat-batch-stated", "per_device_batch_size",
                                         ("remat_policy", "minimal"), 8),
                                        ("stress-rs-company", "xla_gpu_reduce_scatter_combine_threshold_bytes",
                                         ("xla_gpu_enable_pipelined_reduce_scatter", True), 3 * 2**29)):
        land = load_landscape(name, stress)
        best = land.best().settings
        assert best[added[0]] == added[1] and best[numeric] == cliff - 1
        assert land.oom_bytes({added[0]: added[1], numeric: cliff}) is not None and land.oom_bytes({numeric: cliff}) is None
        assert land.true_gain({numeric: 2 * cliff}) > land.true_gain({numeric: cliff - 1})  # alone, past it pays more
    assert load_landscape("stress-remat-batch-stated", stress).baseline == {"per_device_batch_size": 2}
    # the same shape on the other side: fewer microbatches fail, alone from 2 and beside the policy from 16; neither
    # remat job states its count or batch, so a study reads the failing side from the failures alone
    mb = load_landscape("stress-pp-mb-unstated", stress)
    best = mb.best().settings
    assert best["remat_policy"] == "minimal" and best["num_pipeline_microbatches"] == 17
    assert mb.oom_bytes({"remat_policy": "minimal", "num_pipeline_microbatches": 16}) is not None
    assert mb.oom_bytes({"num_pipeline_microbatches": 2}) is not None and mb.oom_bytes({"num_pipeline_microbatches": 4}) is None
    assert mb.true_gain({"num_pipeline_microbatches": 12}) > mb.true_gain({"num_pipeline_microbatches": 17})
    assert mb.baseline == {} and load_landscape("stress-remat-batch", stress).baseline == {}
    shift = load_landscape("stress-null-shift", stress)
    assert shift.drift_model["shift"] < 0 and shift.best().gain == 0.0
