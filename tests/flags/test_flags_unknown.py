"""XLA's flag-rejection messages in every shape seen in the wild."""

from __future__ import annotations

from flagopt.flags import parse_flag_rejection, reliable_flag_text
from flagopt.workloads import _emit


def test_singular_message_and_libtpu_variable() -> None:
    rejection = parse_flag_rejection("F0101 00:00:00.0 1 x.cc:1] Unknown flag in LIBTPU_INIT_ARGS: --xla_tpu_x=1")
    assert rejection is not None
    assert rejection.env_var == "LIBTPU_INIT_ARGS" and rejection.names == ("xla_tpu_x",)


def test_old_double_space_quirk_keeps_only_the_reliable_part() -> None:
    assert reliable_flag_text("--a=1  --known=0 ") == "--a=1"
    assert reliable_flag_text("--a=1 --b=2") == "--a=1 --b=2"


def test_emitted_messages_round_trip_for_every_format() -> None:
    for version in ("0.4.28", "0.5.0", "0.6.0", "0.7.2", "0.10.2"):
        text = _emit.unknown_flags_message(["--xla_a=1", "--xla_b=2"], version, stale=["--xla_known=0"])
        rejection = parse_flag_rejection(text)
        assert rejection is not None and rejection.names == ("xla_a", "xla_b"), version


def test_unrelated_text_is_not_a_rejection() -> None:
    assert parse_flag_rejection('os.environ["XLA_FLAGS"] = "--xla_a=1"\ncompleted step: 1, loss: 2.0') is None
