"""Step-line variants from MaxText's history and from multi-process logs, as small inline logs."""

from __future__ import annotations

import math

import pytest

from flagopt.errors import FlagoptError
from flagopt.logs import LogParseError, MetricFieldError, parse_steps

CURRENT = (
    "completed step: {step}, seconds: {sec}, TFLOP/s/device: 651.649, Tokens/s/device: {tok}, "
    "total_weights: 32768, loss: 2.345"
)


def _current(step: int, tok: float = 50000.0, sec: float = 0.324) -> str:
    return CURRENT.format(step=step, sec=sec, tok=tok)


def test_absl_prefixed_lines() -> None:
    log = "\n".join(
        [
            "I0317 10:00:12.100000 1253 train.py:400] Memstats: After params initialized:",
            f"I0317 10:00:13.224641 1253 metric_logger.py:181] {_current(3, tok=49000.5)}",
            f"I0317 10:00:13.550002 1253 metric_logger.py:181] {_current(4, tok=49100.25)}",
        ]
    )
    samples = parse_steps(log)
    assert [(s.step, s.value) for s in samples] == [(3, 49000.5), (4, 49100.25)]
    assert samples[0].loss == 2.345 and samples[0].fields["TFLOP/s/device"] == 651.649


def test_ray_prefixed_lines_with_folding_and_interleaving() -> None:
    host11, host12 = "(run_maxtext_train pid=78967, ip=10.130.0.11) ", "(run_maxtext_train pid=80538, ip=10.130.0.12) "
    log = "\n".join(
        [
            host11 + _current(0, tok=1391.395),
            host12 + "Waiting for step 0 to finish before checkpoint...",
            host12 + _current(0, tok=1388.0),
            host11 + _current(4, tok=14683.24) + " [repeated 9x across cluster]",
        ]
    )
    samples = parse_steps(log)
    assert [(s.step, s.value) for s in samples] == [(0, 1391.395), (4, 14683.24)]
    assert "repeated" not in samples[1].fields and samples[1].loss == 2.345


def test_hash_prefixed_2024_lines_without_tokens() -> None:
    log = "# completed step: 2, seconds: 3.033, TFLOP/s/device: 340.650, loss: 1.989\n# Capture range started.\n"
    (sample,) = parse_steps(log, field="TFLOP/s/device")
    assert (sample.step, sample.value, sample.seconds, sample.loss) == (2, 340.650, 3.033, 1.989)


def test_2023_tflops_key_answers_for_tflops_per_device() -> None:
    log = "completed step: 7, seconds: 2.000, TFLOP/s: 123.456, loss: 3.210\n"
    (sample,) = parse_steps(log, field="TFLOP/s/device")
    assert sample.value == 123.456 and sample.fields == {"seconds": 2.0, "TFLOP/s": 123.456, "loss": 3.21}


def test_padded_keys_of_forked_loggers() -> None:
    log = "completed step: 1, seconds: 0.500, TFLOP/s       : 99.000, loss          : 4.000"
    (sample,) = parse_steps(log, field="TFLOP/s")
    assert (sample.value, sample.loss) == (99.0, 4.0)


def test_first_format_without_colons() -> None:
    log = "completed step: 5, seconds: 1.250, TFLOP/s: 80.0, loss 6.125\ncompleted step 6, seconds 1.0, loss 6.0\n"
    samples = parse_steps(log, field="seconds")
    assert [(s.step, s.value, s.loss) for s in samples] == [(5, 1.25, 6.125), (6, 1.0, 6.0)]


def test_nan_loss_is_kept_and_does_not_spoil_the_metric() -> None:
    (sample,) = parse_steps("completed step: 0, seconds: 0.330, Tokens/s/device: 49575.084, loss: nan")
    assert sample.value == 49575.084
    assert sample.loss is not None and math.isnan(sample.loss)


def test_extra_trailing_fields_are_all_kept() -> None:
    log = (
        "completed step: 12, seconds: 1.101, TFLOP/s/device: 140.1, Tokens/s/device: 14800.5, total_weights: "
        "131072, loss: 2.500, lr: 3.000e-05, grad_norm: 0.875, lm_loss: 2.45, perplexity: 11.588, "
        "moe_lb_loss: 0.0125, main_model_loss: 2.400, mtp_loss: 0.100"
    )
    (sample,) = parse_steps(log)
    assert sample.value == 14800.5
    assert sample.fields["lr"] == 3e-05 and sample.fields["moe_lb_loss"] == 0.0125
    assert sample.fields["perplexity"] == 11.588 and sample.fields["mtp_loss"] == 0.1
    assert list(sample.fields) == [
        "seconds", "TFLOP/s/device", "Tokens/s/device", "total_weights", "loss", "lr", "grad_norm", "lm_loss",
        "perplexity", "moe_lb_loss", "main_model_loss", "mtp_loss",
    ]


def test_field_choice_is_case_insensitive() -> None:
    (sample,) = parse_steps(_current(1, tok=123.5), field="tokens/s/device")
    assert sample.value == 123.5


def test_repeated_steps_keep_the_first_print() -> None:
    log = "\n".join([_current(0, tok=10.0), _current(1, tok=11.0), _current(1, tok=99.0), _current(2, tok=12.0)])
    assert [(s.step, s.value) for s in parse_steps(log)] == [(0, 10.0), (1, 11.0), (2, 12.0)]


def test_step_lines_glued_together_by_two_writers_are_split() -> None:
    glued = "completed step: 3, seconds: 0.5, Tokens/s/device: 300.0, loss: 1.0" + _current(3, tok=301.0)
    log = "\n".join([glued, "completed step: 4, seconds: 0.5, Tokens/s/device: 400.0, loss: 1.0"])
    assert [(s.step, s.value) for s in parse_steps(log)] == [(3, 300.0), (4, 400.0)]


def test_lines_that_look_like_steps_but_are_not() -> None:
    log = "\n".join(
        [
            "eval metrics after step: 9, loss=2.100, total_weights=4096",
            "completed profiler activation/deactivation step: 10, seconds: 0.5, total_weights: 1, loss: 1",
            "Completed step: parse config",
            _current(11, tok=777.0),
        ]
    )
    assert [(s.step, s.value) for s in parse_steps(log)] == [(11, 777.0)]


def test_rampup_lines_without_throughput_are_left_out_unless_derivable() -> None:
    log = "\n".join(
        [
            "[Rampup Batch Size Phase], completed step: 0, seconds: 2.000, total_weights: 4096, loss: 9.0",
            _current(1, tok=8000.0, sec=1.0),
        ]
    )
    assert [s.step for s in parse_steps(log)] == [1]
    derived = parse_steps(log, tokens_per_step=4096)
    assert [(s.step, s.value) for s in derived] == [(0, 2048.0), (1, 8000.0)]  # the printed value wins on step 1


def test_derivation_only_for_the_tokens_metric() -> None:
    log = "completed step: 0, seconds: 0.5, loss: 1.0"
    with pytest.raises(MetricFieldError):
        parse_steps(log, field="TFLOP/s/device", tokens_per_step=1000)


def test_missing_field_error_lists_the_fields_there_are() -> None:
    with pytest.raises(MetricFieldError) as err:
        parse_steps("completed step: 0, seconds: 0.5, loss: 1.0\n", field="Samples/s", source="run/rank0.log")
    message = str(err.value)
    assert message.startswith("run/rank0.log: Samples/s: ")
    assert "loss, seconds" in message
    assert isinstance(err.value, FlagoptError) and isinstance(err.value, ValueError)


def test_missing_tokens_without_seconds_says_it_cannot_derive() -> None:
    with pytest.raises(MetricFieldError, match="no 'seconds'"):
        parse_steps("completed step: 0, TFLOP/s/device: 1.0, loss: 1.0\n", tokens_per_step=1000)


def test_a_log_without_step_lines_is_empty_not_an_error() -> None:
    assert parse_steps("Jax distributed system initialized on GPU!\n") == []


@pytest.mark.parametrize("bad", [0, -5.0, float("nan"), float("inf")])
def test_tokens_per_step_must_be_positive(bad: float) -> None:
    with pytest.raises(LogParseError, match="tokens_per_step"):
        parse_steps(_current(0), tokens_per_step=bad)


def test_unknown_format_names_the_known_ones() -> None:
    with pytest.raises(LogParseError, match="maxtext, regex"):
        parse_steps(_current(0), fmt="megatron")


def test_samples_are_read_only() -> None:
    (sample,) = parse_steps(_current(0))
    with pytest.raises(TypeError):
        sample.fields["loss"] = 0.0  # type: ignore[index]
