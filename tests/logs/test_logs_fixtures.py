"""Every real log under tests/fixtures/logs parses into the steps and values a reader of the file sees."""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from pathlib import Path

import pytest

from flagopt.logs import (
    MetricFieldError,
    MetricWindowError,
    parse_steps,
    run_info,
    steady_state,
    tokens_per_device_step,
)

Reader = Callable[[str], str]

DEEPSEEK = "01_maxtext_docs_tpu_v5p_deepseek2_16b_10steps.log"
LLAMA_2024 = "02_maxtext_gpu_h100_llama2_7b_nsys_2024-03_old_format.log"
RAY = "05_maxtext_ray_tpu_v4_16_multihost_dedup.log"
GPT3 = "07_maxtext_gpu_gpt3_175b_tokens_no_total_weights_2024.log"
#: The probe's batch: B=16 sequences of S=2048 tokens over 2 GPUs (first line of each h200 fixture).
H200_TOKENS_PER_DEVICE_STEP = 16 * 2048 / 2


def test_every_fixture_keeps_its_source_line(fixtures_dir: Path, read_log: Reader) -> None:
    names = sorted(p.name for p in fixtures_dir.iterdir() if p.is_file())
    assert len(names) == 11
    for name in names:
        assert read_log(name).startswith("# SOURCE: "), name


def test_h200_logs_have_fifteen_steps_with_nan_loss(h200_log: str) -> None:
    samples = parse_steps(h200_log)
    assert [s.step for s in samples] == list(range(15))
    assert all(s.loss is not None and math.isnan(s.loss) for s in samples)
    assert all(s.fields["total_weights"] == 32768 for s in samples)
    steady = steady_state(samples, (9, 14))
    assert steady.n == 6 and 49_000 < steady.mean < 53_000
    assert 0 < steady.std < 0.02 * steady.mean


def test_h200_tokens_field_is_tokens_per_device(h200_log: str) -> None:
    # Tokens/s/device x seconds must give back the batch's tokens per device on every step.
    for s in parse_steps(h200_log):
        assert s.seconds is not None
        assert s.value * s.seconds == pytest.approx(H200_TOKENS_PER_DEVICE_STEP, rel=2e-3)


def test_h200_base_a_window_mean_matches_the_printed_values(read_log: Reader) -> None:
    # Steps 9-14 of log_base_a.txt, copied from the file by hand.
    printed = (50737.641, 50559.405, 50511.288, 50526.108, 50760.302, 50403.372)
    steady = steady_state(parse_steps(read_log("h200x2_fsdp_log_base_a.txt")), (9, 14))
    assert steady.values == printed
    assert steady.mean == pytest.approx(statistics.mean(printed))
    assert steady.std == pytest.approx(statistics.stdev(printed))


def test_deriving_from_seconds_agrees_with_the_printed_tokens(h200_log: str) -> None:
    printed = parse_steps(h200_log)
    derived = parse_steps(h200_log.replace("Tokens/s/device", "Other"), tokens_per_step=H200_TOKENS_PER_DEVICE_STEP)
    assert [s.step for s in derived] == [s.step for s in printed]
    for p, d in zip(printed, derived):
        assert d.value == pytest.approx(p.value, rel=2e-3)  # seconds are printed to 1 ms


def test_deepseek_docs_log_keeps_the_first_print_of_repeated_steps(read_log: Reader) -> None:
    samples = parse_steps(read_log(DEEPSEEK))
    assert [s.step for s in samples] == list(range(10))
    by_step = {s.step: s for s in samples}
    # The c4 block at the end repeats steps 8 and 9 with other numbers; the first prints win.
    assert by_step[8].value == 8671.946 and by_step[8].fields["total_weights"] == 196608
    assert by_step[9].loss == 10.374
    assert by_step[0].seconds == 44.923  # compile step, outside any sensible window
    assert steady_state(samples, (3, 9)).mean == pytest.approx(8700, rel=0.01)


def test_2024_log_without_tokens_needs_tokens_per_step(read_log: Reader) -> None:
    text = read_log(LLAMA_2024)
    with pytest.raises(MetricFieldError, match="tokens_per_step") as err:
        parse_steps(text, source=LLAMA_2024)
    assert "TFLOP/s/device" in str(err.value) and LLAMA_2024 in str(err.value)


def test_2024_log_tflops_and_derived_tokens(read_log: Reader) -> None:
    text = read_log(LLAMA_2024)
    tflops = parse_steps(text, field="TFLOP/s/device")
    assert [s.step for s in tflops] == list(range(30))
    assert tflops[2].value == 340.650 and tflops[6].seconds == 18.009  # the nsys capture outlier
    tokens = parse_steps(text, tokens_per_step=12 * 2048)  # per_device_batch_size 12, llama2 length 2048
    # Both metrics are work / seconds, so their ratio is the same on every step.
    ratios = [t.value / f.value for t, f in zip(tokens, tflops)]
    assert max(ratios) / min(ratios) < 1.01
    steady = steady_state(tokens, (10, 29))
    assert 5_500 < steady.mean < 6_500


def test_2024_log_run_info(read_log: Reader) -> None:
    info = run_info(read_log(LLAMA_2024))
    assert info["jax_version"] == "0.4.25" and info["jaxlib_version"] == "0.4.25"
    assert info["jax_backend"] == "cuda 12030"
    assert info["num_devices"] == "8" and info["mesh_shape"] == "(1, 8, 1, 1, 1, 1)"
    assert info["num_parameters"] == "6.738 billion"
    assert info["tflops_per_step"] == "1033.20"
    assert info["cudnn_version"] == "8907" and info["cuda_driver_version"] == "12.2"
    assert info["config.per_device_batch_size"] == "12.0" and info["config.remat_policy"] == "full"
    assert tokens_per_device_step(info) is None  # max_target_length is not in this log
    assert tokens_per_device_step({**info, "config.max_target_length": "2048"}) == 24576


def test_deepseek_run_info(read_log: Reader) -> None:
    info = run_info(read_log(DEEPSEEK))
    assert info["jax_version"] == "0.7.2.dev20250826"
    assert info["jax_backend"] == "PJRT C API"
    assert info["num_devices"] == "4"
    assert info["tflops_per_step"] == "764.67"
    assert info["estimated_memory"] == "100.4 GB"
    assert "nccl_version" not in info  # a TPU run


def test_ray_log_keeps_what_ray_did_not_fold_away(read_log: Reader) -> None:
    samples = parse_steps(read_log(RAY))
    assert [s.step for s in samples] == [0, 4, 9, 14, 89, 94, 99]
    last = samples[-1]
    # Step 99 is printed by both hosts; the first (host .11) print wins over the later 13753.874.
    assert last.value == 14679.412 and last.loss == 0.0
    with pytest.raises(MetricWindowError) as err:
        steady_state(samples, (90, 99))
    assert err.value.missing == (90, 91, 92, 93, 95, 96, 97, 98)
    assert err.value.seen == 7
    assert "90-93, 95-98" in str(err.value) and "7 steps" in str(err.value)


def test_gpt3_log_without_total_weights(read_log: Reader) -> None:
    samples = parse_steps(read_log(GPT3))
    assert [s.step for s in samples] == list(range(12))
    assert all("total_weights" not in s.fields for s in samples)
    assert samples[0].loss == 2659.990
    steady = steady_state(samples, (3, 11))
    assert 1_780 < steady.mean < 1_810 and steady.std < 10
