"""MaxText 0.2.5's own failure output (real logs from a CPU run) classifies as docs/failures.md says."""

from __future__ import annotations

from pathlib import Path

from flagopt.failures import CRASH, OOM, UNKNOWN_FLAG, classify, handling_for

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "failures"


def failure_of(name: str):
    failure = classify((FIXTURES / name).read_text(encoding="utf-8"), exit_code=1)
    assert failure is not None
    return failure


def test_an_unknown_xla_flag_under_maxtext_is_unknown_flag_and_names_the_flag() -> None:
    failure = failure_of("maxtext_0.2.5_unknown_xla_flag.log")
    assert failure.failure_class == UNKNOWN_FLAG
    assert failure.details["unknown_flags"] == ["--xla_bogus_flag=1"]
    assert handling_for(failure.failure_class).exclude_value


def test_a_typo_in_a_maxtext_key_is_a_crash_that_names_the_key_not_maxtexts_whole_key_list() -> None:
    failure = failure_of("maxtext_0.2.5_config_unknown_key.log")
    assert failure.failure_class == CRASH
    assert failure.details["signature"] == "maxtext-config-key"
    assert failure.details["config_key"] == "'per_device_batch_sizee'"
    assert failure.reason.startswith("MaxText's config has no key 'per_device_batch_sizee'")
    assert len(failure.reason) < 200  # MaxText's message goes on to list all ~900 valid keys
    assert all(len(str(value)) <= 400 for value in failure.details.values())
    assert handling_for(failure.failure_class).status == "failed" and handling_for(failure.failure_class).retries == 0


def test_a_value_maxtexts_config_rejects_is_a_crash_with_pydantics_reason_and_the_value() -> None:
    failure = failure_of("maxtext_0.2.5_config_bad_value.log")
    assert failure.failure_class == CRASH
    assert failure.details["signature"] == "maxtext-config-value"
    assert failure.details["input_value"] == "'abc'"
    assert "Input should be a valid integer" in failure.reason and "'abc'" in failure.reason
    assert any("MAXTEXT CONFIG ERROR" in line for line in failure.lines)


def test_maxtext_out_of_memory_on_cpu_is_oom_with_the_requested_bytes() -> None:
    failure = failure_of("maxtext_0.2.5_cpu_oom.log")
    assert failure.failure_class == OOM
    assert failure.details["requested_bytes"] == 470637909936
    assert handling_for(failure.failure_class).infeasible


def test_a_config_message_after_training_started_is_not_blamed_on_the_config() -> None:
    text = (FIXTURES / "maxtext_0.2.5_config_unknown_key.log").read_text(encoding="utf-8")
    failure = classify(text, exit_code=1, steps_seen=3)
    assert failure is not None and failure.details.get("signature") != "maxtext-config-key"


def test_a_reason_template_with_a_missing_group_or_a_lone_brace_is_left_as_text() -> None:
    from flagopt.failures import signatures_from_data

    extra = signatures_from_data([
        {"name": "a", "class": "crash", "patterns": ["boom (?P<what>\\w+)"], "reason": "boom: {what}, {other}"},
        {"name": "b", "class": "crash", "patterns": ["bang"], "reason": "bang {"},
    ], "space.yaml")  # fmt: skip
    assert classify("boom now", exit_code=1, extra_signatures=extra[:1]).reason == "boom: now, {other}"
    assert classify("bang", exit_code=1, extra_signatures=extra[1:]).reason == "bang {"
