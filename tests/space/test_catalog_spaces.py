"""The shipped catalog spaces: they load, use no flag current jaxlib rejects, and render their recipes last-wins."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from flagopt.flags import FlagRegistry
from flagopt.render import baseline_configs, render
from flagopt.space import Space, TrialConfig, load_space, render_value

CATALOG = Path(__file__).resolve().parents[2] / "search_spaces"
ALL_FILES = sorted(p.name for p in CATALOG.glob("*.yaml"))
MAXTEXT = ["fsdp.yaml", "pp.yaml", "tp.yaml", "tpu.yaml", "maxtext_cpu.yaml"]
GPU = ["fsdp.yaml", "pp.yaml", "tp.yaml"]
# A source checkout (python3 -m MaxText.train MaxText/configs/base.yml) or the packaged trainer.
TRAINERS = {("MaxText.train", "MaxText/configs/base.yml"),
            ("maxtext.trainers.pre_train.train", "src/maxtext/configs/base.yml")}
# "# <flag> dropped: removed in jaxlib <version>" next to a recipe profile.
DROPPED = re.compile(r"#\s*(xla_[a-z0-9_]+)\S*\s+dropped: removed in jaxlib ([0-9.]+)")


def space(name: str) -> Space:
    return load_space(CATALOG / name)


def last_value(flags: str, name: str) -> str | None:
    """How XLA and libtpu read a repeated flag: the last occurrence wins."""
    value = None
    for token in flags.split():
        if token.startswith(f"--{name}="):
            value = token.split("=", 1)[1]
    return value


def args_of(argv: tuple[str, ...]) -> dict[str, str]:
    return dict(a.split("=", 1) for a in argv if "=" in a and not a.startswith("-"))


def flag_names(s: Space) -> set[str]:
    """Every XLA/libtpu flag a catalog space can put in front of XLA."""
    names = {t[2:].split("=", 1)[0] for t in (*s.baseline.xla_flags, *s.baseline.libtpu_flags)}
    names |= {name for name, _ in s.baseline.defaults if name.startswith(("xla_", "tpu_"))}
    names |= {p.key for p in s.params if p.target in ("xla", "libtpu")}
    for profile in s.profiles:
        names |= {name for name, _ in (*profile.xla, *profile.libtpu)}
    return names


@pytest.fixture(scope="module")
def registry() -> FlagRegistry:
    return FlagRegistry.load()


@pytest.mark.parametrize("name", ALL_FILES)
def test_every_catalog_file_loads(name):
    s = space(name)
    assert s.command and s.params


@pytest.mark.parametrize("name", MAXTEXT)
def test_maxtext_spaces_run_a_short_synthetic_job_measured_in_its_steady_window(name):
    s = space(name)
    assert s.command[1] == "-m" and (s.command[2], s.command[3]) in TRAINERS
    args = args_of(s.command)
    assert args["dataset_type"] == "synthetic"
    steps = int(args["steps"])
    assert s.metric.format == "maxtext" and s.metric.field == "Tokens/s/device"
    assert s.metric.window[1] < steps, "the window must end on a step the job prints"
    assert s.failures.init_timeout_min < s.timeout_min
    if s.executor.kind == "slurm" and s.executor.slurm.time_min is not None:
        assert s.executor.slurm.time_min > s.timeout_min, "Slurm must not kill a trial before flagopt's own timeout"


@pytest.mark.parametrize("name", ALL_FILES)
def test_no_flag_is_removed_or_not_yet_in_the_newest_tested_jaxlib(name, registry):
    newest = registry.tested_jaxlib[-1]
    bad = {n: registry.removal_note(n) or registry.status(n, newest) for n in flag_names(space(name))
           if registry.status(n, newest) in ("removed", "not-yet")}
    assert not bad, f"{name} uses flags jaxlib {newest} rejects: {bad}"


def test_dropped_flag_comments_match_the_registry_and_the_flags_are_really_gone(registry):
    found = 0
    for name in MAXTEXT:
        text = (CATALOG / name).read_text()
        used = flag_names(space(name))
        for flag, version in DROPPED.findall(text):
            found += 1
            info = registry.get(flag)
            assert info is not None, f"{name}: {flag} is not in the registry"
            assert info.removed_in == version, f"{name}: {flag} was removed in {info.removed_in}, not {version}"
            assert flag not in used, f"{name}: {flag} is said to be dropped but is still set"
    assert found >= 3


@pytest.mark.parametrize("name", ALL_FILES)
def test_profiles_render_their_values_last_on_top_of_the_baseline(name):
    s = space(name)
    for profile in s.profiles:
        r = render(s, profile, inherited={})
        tokens = r.xla_flags.split()
        assert tokens[: len(s.baseline.xla_flags)] == list(s.baseline.xla_flags)
        for flag, value in profile.xla:
            assert last_value(r.xla_flags, flag) == render_value(value), (profile.profile, flag)
        for flag, value in profile.libtpu:
            assert last_value(r.libtpu_init_args, flag) == render_value(value), (profile.profile, flag)
        for var, value in profile.env:
            assert r.env[var] == render_value(value)
        keys = [a.split("=", 1)[0] for a in r.argv if "=" in a]
        assert len(keys) == len(set(keys)), f"{profile.profile}: a workload arg is given twice: {keys}"
        for arg, value in profile.args:
            assert args_of(r.argv)[arg] == render_value(value)


@pytest.mark.parametrize("name", GPU)
def test_baseline_defaults_are_xla_defaults_and_no_env_restores_every_deployed_flag(name, registry):
    s = space(name)
    defaults = dict(s.baseline.defaults)
    for flag, value in defaults.items():
        assert render_value(value).lower() == (registry.default(flag) or "").lower(), flag
    deployed, no_env = (render(s, c, inherited={}) for c in baseline_configs(s))
    assert not no_env.notes
    for token in s.baseline.xla_flags:
        flag = token[2:].split("=", 1)[0]
        assert last_value(no_env.xla_flags, flag) == render_value(defaults[flag])
        assert last_value(deployed.xla_flags, flag) == token.split("=", 1)[1]
    for var, _ in s.baseline.env:
        assert no_env.env[var] is None or var in defaults


def test_pp_microbatches_is_an_arg_param_maxtext_can_split_the_batch_into():
    s = space("pp.yaml")
    (mb,) = [p for p in s.params if p.target == "arg" and p.key == "num_pipeline_microbatches"]
    args = {**args_of(s.command), **{k: str(v) for k, v in s.baseline.args}}
    stages = int(args.get("ici_pipeline_parallelism", 1)) * int(args.get("dcn_pipeline_parallelism", 1))
    fsdp = int(args.get("ici_fsdp_parallelism", 1)) * int(args.get("dcn_fsdp_parallelism", 1))
    devices = s.executor.slurm.nodes * s.executor.slurm.gpus_per_node
    global_batch = int(args["per_device_batch_size"]) * devices
    assert stages > 1 and len(mb.choices) >= 2
    assert int(args["num_pipeline_microbatches"]) in mb.choices
    for count in mb.choices:
        assert count % stages == 0, f"{count} microbatches for {stages} stages"
        assert global_batch % count == 0 and (global_batch // count) % fsdp == 0, count


def test_tpu_tunes_libtpu_flags_and_attention_blocks_that_fit_the_sequence():
    s = space("tpu.yaml")
    assert s.baseline.libtpu_flags and not s.baseline.xla_flags
    assert sum(p.target == "libtpu" for p in s.params) >= 5
    seq = int(dict(s.baseline.args)["max_target_length"])
    blocks = {p.key: p.choices for p in s.params if p.target == "arg" and p.key.startswith("sa_block")}
    assert set(blocks) >= {"sa_block_q", "sa_block_kv"}
    for key, choices in blocks.items():
        assert all(seq % c == 0 for c in choices), key
    assert all(c % 512 == 0 for c in blocks["sa_block_kv"]), "sa_block_kv_compute (512) must divide sa_block_kv"
    assert any(p.key == "remat_policy" and p.target == "arg" for p in s.params)


def _configs_to_preflight() -> list[tuple[str, str]]:
    return [(name, c.profile) for name in GPU for c in (*baseline_configs(space(name)), *space(name).profiles)] + [
        (name, "every-param-value") for name in GPU]


@pytest.mark.slow
@pytest.mark.parametrize(("name", "label"), _configs_to_preflight())
def test_installed_jax_starts_with_the_rendered_flags(name, label):
    s = space(name)
    if label == "every-param-value":
        # XLA parses every occurrence, so one start checks all values of all params.
        values = [(p.key, v) for p in s.params if p.target == "xla"
                  for v in (p.choices or (int(p.low), int(p.high)))]
        config = TrialConfig("sampled", label, xla=tuple(values))
    else:
        config = next(c for c in (*baseline_configs(s), *s.profiles) if c.profile == label)
    flags = render(s, config, inherited={}).xla_flags
    env = {"PATH": os.environ.get("PATH", ""), "JAX_PLATFORMS": "cpu", "XLA_FLAGS": flags}
    proc = subprocess.run([sys.executable, "-c", "import jax; jax.devices()"], env=env, capture_output=True,
                          text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "Unknown flag" not in proc.stderr


def test_the_annotated_example_in_docs_loads_and_renders_as_documented(tmp_path):
    doc = (CATALOG.parent / "docs" / "space.md").read_text()
    section = doc.split("## A complete annotated example", 1)[1]
    example = section.split("```yaml\n", 1)[1].split("```", 1)[0]
    shown = section.split("```\nXLA_FLAGS=<inherited> ", 1)[1].split("\n", 1)[0]
    (tmp_path / "configs").mkdir()
    env_file = CATALOG / "configs" / "maxtext-gpu-h100.env.sh"
    (tmp_path / "configs" / env_file.name).write_text(env_file.read_text())
    (tmp_path / "space.yaml").write_text(example)
    s = load_space(tmp_path / "space.yaml")
    profile = next(p for p in s.profiles if p.profile == "pipelined_ag")
    assert render(s, profile, inherited={}).xla_flags == shown
    no_env = render(s, baseline_configs(s)[1], inherited={})
    assert no_env.xla_flags.endswith("--xla_gpu_enable_latency_hiding_scheduler=false "
                                      "--xla_gpu_all_gather_combine_threshold_bytes=31457287")
    assert {name for name, _ in s.baseline.env} == {"NCCL_PROTO", "CUDA_DEVICE_MAX_CONNECTIONS",
                                                  "XLA_PYTHON_CLIENT_MEM_FRACTION"}
    assert all(no_env.env[name] is None for name, _ in s.baseline.env)
