"""Failures blamed on the setting they share: never spend a run on it again."""

from __future__ import annotations

import textwrap

from flagopt.space import load_space
from flagopt.decide import Blame, blame_failures, blamed_by
from flagopt.decide import deployed_values
from flagopt.decide import RunRecord

SPACE = """
    name: b
    command: [python, -c, pass]
    baseline:
      xla_flags: "--xla_gpu_all_gather_combine_threshold_bytes=8589934592"
      defaults: {xla_gpu_enable_pipelined_p2p: false, xla_gpu_enable_while_loop_double_buffering: false}
    params:
      ag: {xla: xla_gpu_all_gather_combine_threshold_bytes, type: int, low: 67108864, high: 68719476736, log: true}
      p2p: {xla: xla_gpu_enable_pipelined_p2p, choices: [true, false]}
      dbuf: {xla: xla_gpu_enable_while_loop_double_buffering, choices: [true, false]}
"""


def rec(number: int, values: dict, status: str = "ok", failure_class: str | None = None, *, part: str = "xla") -> RunRecord:
    attrs = {"settings": {"xla": {}, "env": {}, "args": {}, "libtpu": {}, part: values}}
    if failure_class:
        attrs["failure_class"] = failure_class
    return RunRecord(number, "probe", "p", f"k{number}", status, 100.0 if status == "ok" else None, float(number),
                     0.0 if status == "ok" else None, attrs=attrs)


def blames_of(tmp_path, records):
    path = tmp_path / "s.yaml"
    path.write_text(textwrap.dedent(SPACE))
    space = load_space(path)
    return blame_failures(space, records, deployed_values(space))


AG = "xla_gpu_all_gather_combine_threshold_bytes"
P2P = "xla_gpu_enable_pipelined_p2p"
DBUF = "xla_gpu_enable_while_loop_double_buffering"


def test_a_one_factor_oom_blames_the_value_and_every_larger_one(tmp_path):
    blames = blames_of(tmp_path, [rec(1, {AG: 2**34}), rec(2, {AG: 2**36}, "infeasible", "oom")])
    assert [(b.param, b.value, b.direction) for b in blames] == [("ag", 2**36, 1)]
    assert blamed_by(blames, {"ag": 2**36, "p2p": True}) is not None
    assert blamed_by(blames, {"ag": 2**35}) is None  # below the failing value: not known to fail
    assert "ag=68719476736 (and every larger value) failed: oom" in blames[0].sentence()


def test_a_larger_value_that_ran_bounds_the_cliff(tmp_path):
    blames = blames_of(tmp_path, [rec(1, {AG: 2**36}), rec(2, {AG: 2**34}, "infeasible", "oom")])
    assert [(b.value, b.direction) for b in blames] == [(2**34, 0)]


def test_a_shared_setting_of_repeated_combined_failures_is_blamed_once_no_success_has_it(tmp_path):
    records = [rec(1, {P2P: True, AG: 2**30}, "infeasible", "oom"), rec(2, {P2P: True, DBUF: True}, "infeasible", "oom"),
               rec(3, {AG: 2**30}), rec(4, {DBUF: True})]
    blames = blames_of(tmp_path, records)
    assert [(b.param, b.value, b.failed) for b in blames] == [("p2p", True, 2)]


def test_one_combined_failure_blames_the_pair_in_company_and_neither_alone(tmp_path):
    (pair,) = blames_of(tmp_path, [rec(1, {P2P: True, AG: 2**30}, "infeasible", "oom")])
    assert pair.company and not pair.covers("p2p", True) and not pair.covers("ag", 2**30)
    assert blamed_by([pair], {"p2p": True}) is None and blamed_by([pair], {"ag": 2**30}) is None
    # with more settings, or past the failing threshold (away from the deployed 8 GiB), the pair still fails
    assert blamed_by([pair], {"p2p": True, "ag": 2**29, "dbuf": True}) is pair
    assert blamed_by([pair], {"p2p": True, "ag": 2**31}) is None
    assert "together with" in pair.sentence() and pair.to_json()["company"]
    assert blames_of(tmp_path, [rec(1, {P2P: True}, "flake", "hang"), rec(2, {P2P: True}, "flake", "nccl-init")]) == []


def test_the_smallest_failing_set_is_blamed_and_a_run_that_ran_fine_bounds_it(tmp_path):
    """stress-combo-oom: a combination ran out of memory, then its drop-one variant: the pair is the culprit, and a
    combination with both and a third setting is not run again. A run of the pair past the threshold that ran fine
    bounds the blame to the failing value."""
    alone = [rec(5, {P2P: True}), rec(6, {AG: 2**30})]  # each ran fine alone (its one-factor probe)
    three = rec(1, {P2P: True, AG: 2**30, DBUF: True}, "infeasible", "oom")
    two = rec(2, {P2P: True, AG: 2**30}, "infeasible", "oom")
    (blame,) = blames_of(tmp_path, [*alone, three, two])
    assert sorted(n for n, _, _ in blame.members()) == ["ag", "p2p"] and blame.failed == 1
    assert blamed_by([blame], {"p2p": True, "ag": 2**28}) is blame
    fine = rec(3, {P2P: True, AG: 2**28})
    (bounded,) = blames_of(tmp_path, [*alone, three, two, fine])
    assert blamed_by([bounded], {"p2p": True, "ag": 2**28}) is None
    assert blamed_by([bounded], {"p2p": True, "ag": 2**30, "dbuf": False}) is bounded
    # a run that ran fine with every setting of a failure contradicts it: nothing is blamed
    assert blames_of(tmp_path, [*alone, two, rec(4, {P2P: True, AG: 2**30, DBUF: True})]) == []


ARGS_SPACE = """
    name: b
    command: [python, -c, pass]
    params:
      batch: {arg: per_device_batch_size, type: int, low: 1, high: 32, log: true}
      remat: {arg: remat_policy, choices: [full, minimal]}
"""


def test_where_the_deployed_value_is_not_stated_the_side_its_failures_alone_show_is_the_cliff_s(tmp_path):
    """stress-remat-batch: the job's arguments leave the batch size at the framework's default. A batch of 32 fails
    alone above every batch that ran, so larger batches are the failing side; the minimal policy failing beside a
    batch of 16 is blamed at 16 and beyond, not below."""
    path = tmp_path / "s.yaml"
    path.write_text(textwrap.dedent(ARGS_SPACE))
    space = load_space(path)

    def run(number: int, args: dict, status: str = "ok") -> RunRecord:
        return rec(number, args, status, "oom" if status != "ok" else None, part="args")

    ran = [run(i, {"per_device_batch_size": b}) for i, b in enumerate((1, 4, 16), 1)] + [run(4, {"remat_policy": "minimal"})]
    company = run(6, {"per_device_batch_size": 16, "remat_policy": "minimal"}, "infeasible")
    assert deployed_values(space)["batch"] is None
    # without a failure alone nothing shows the side: the pair is blamed at 16 only
    (pair,) = blame_failures(space, [*ran, company], deployed_values(space))
    assert blamed_by([pair], {"batch": 32, "remat": "minimal"}) is None
    alone, pair = blame_failures(space, [*ran, run(5, {"per_device_batch_size": 32}, "infeasible"), company],
                                 deployed_values(space))
    assert (alone.param, alone.direction) == ("batch", 1) and pair.company
    assert blamed_by([pair], {"batch": 23, "remat": "minimal"}) is pair
    assert blamed_by([pair], {"batch": 8, "remat": "minimal"}) is None
    # a batch that failed alone below one that ran shows no side
    low = blame_failures(space, [*ran, run(5, {"per_device_batch_size": 2}, "infeasible")], deployed_values(space))
    assert [(b.value, b.direction) for b in low] == [(2, 0)]


def test_blame_covers_only_its_own_param_and_side():
    b = Blame("ag", 2**30, "oom", failed=1, direction=-1)
    assert b.covers("ag", 2**29) and b.covers("ag", 2**30) and not b.covers("ag", 2**31)
    assert not b.covers("p2p", 2**29)


def hung(number: int, xla: dict, key: str) -> RunRecord:
    attrs = {"settings": {"xla": xla, "env": {}, "args": {}, "libtpu": {}}, "failure_class": "hang"}
    return RunRecord(number, "probe", "p", key, "flake", None, float(number), None, attrs=attrs)


def test_a_hang_is_the_infrastructure_s_until_its_retry_hangs_too(tmp_path):
    """issue 23 point 3: `hang=1` hung, its retry hung, then it was proposed and hung twice more."""
    once = blames_of(tmp_path, [hung(1, {P2P: True}, "kp")])
    assert once == []  # one hang: retried, not blamed
    twice = blames_of(tmp_path, [hung(1, {P2P: True}, "kp"), hung(2, {P2P: True}, "kp")])
    assert [(b.param, b.value, b.failure_class) for b in twice] == [("p2p", True, "hang")]
    assert blamed_by(twice, {"p2p": True, "ag": 2**30}) is not None  # the sampler's points with it are not run
    fine = rec(3, {P2P: True})
    fine = RunRecord(3, "probe", "p", "kp", "ok", 100.0, 3.0, 0.0, attrs=fine.attrs)  # the same configuration
    ran = blames_of(tmp_path, [hung(1, {P2P: True}, "kp"), hung(2, {P2P: True}, "kp"), fine])
    assert ran == []  # it also ran fine once: a flaky node, not the setting


def test_a_value_the_installed_xla_rejects_is_blamed_whether_it_ran_or_was_not_run(tmp_path):
    """An unknown flag aborts at XLA start (``failed``), or is not run at all once pre-flight or an earlier run found
    it (``invalid``): no run can ever measure it, so it counts out of the space like an out-of-memory value."""
    aborted = blames_of(tmp_path, [rec(1, {P2P: True}, "failed", "unknown-flag")])
    not_run = blames_of(tmp_path, [rec(1, {DBUF: True}, "invalid", "unknown-flag")])
    assert [(b.param, b.value, b.failure_class) for b in aborted] == [("p2p", True, "unknown-flag")]
    assert [(b.param, b.value, b.failure_class) for b in not_run] == [("dbuf", True, "unknown-flag")]
    assert not_run[0].sentence() == "the installed XLA rejects dbuf=true: unknown-flag"
    # a run that never started for another reason (a submit refused by Slurm) says nothing about the value
    assert blames_of(tmp_path, [rec(1, {DBUF: True}, "invalid", "submit-failed")]) == []


def rejected(number: int, xla: dict, *, names: list[str], bad_values: list | None = None) -> RunRecord:
    """A run XLA aborted at start, with what the failure classifier read from its message."""
    record = rec(number, xla, "failed", "unknown-flag")
    record.attrs["failure_details"] = {"flag_names": names, "bad_values": bad_values or []}
    return record


def test_a_flag_xla_does_not_know_is_blamed_for_every_value_and_a_bad_value_for_itself(tmp_path):
    """"Unknown flag in XLA_FLAGS: --xla_..._bytes=1073741824" names the flag, not the value: no other value of it
    can run either, so the screen does not probe the next ones (a 41-value range cost three aborted runs before)."""
    unknown = blames_of(tmp_path, [rejected(1, {AG: 2**30}, names=[AG])])
    assert [(b.param, b.value, b.every) for b in unknown] == [("ag", 2**30, True)]
    assert blamed_by(unknown, {"ag": 2**34}) is not None and blamed_by(unknown, {"ag": 2**26}) is not None
    assert blamed_by(unknown, {"p2p": True}) is None
    assert unknown[0].sentence() == ("the installed XLA rejects ag=1073741824 (it does not know the flag: every value "
                                     "is left out): unknown-flag")
    assert unknown[0].to_json()["every"] is True
    # a value XLA could not parse ("Couldn't interpret value ...") is that value's fault alone
    bad = blames_of(tmp_path, [rejected(1, {AG: 2**30}, names=[], bad_values=[[AG, "1073741824"]])])
    assert [(b.param, b.value, b.every) for b in bad] == [("ag", 2**30, False)]
    assert blamed_by(bad, {"ag": 2**34}) is None
    # in a combination, the flag the message names is the one blamed, not its companions
    combo = blames_of(tmp_path, [rejected(1, {AG: 2**30, P2P: True}, names=[AG])])
    assert [(b.param, b.every) for b in combo] == [("ag", True)]


def test_two_hangs_of_one_configuration_are_the_cluster_s_where_other_launches_hang_too(tmp_path):
    """flaky-50020: the +7 % winner's probe hung twice in three launches where 3 % of all launches hang; blamed, it
    never ran again and the study ended null. Where other launches hang about as often, it takes a third hang."""
    others = [rec(n, {AG: 2**20 + n}, *(("flake", "hang") if n in (1, 7) else ())) for n in range(30)]
    coordination = RunRecord(31, "probe", "p", "kp", "flake", None, 31.0, None,
                             attrs={**hung(31, {P2P: True}, "kp").attrs, "failure_class": "coordination-timeout"})
    chain = [hung(30, {P2P: True}, "kp"), coordination, hung(32, {P2P: True}, "kp")]
    assert blames_of(tmp_path, [*others, *chain]) == []
    third = blames_of(tmp_path, [*others, *chain, hung(40, {P2P: True}, "kp")])
    assert [(b.param, b.value, b.failure_class) for b in third] == [("p2p", True, "hang")]
    # the same chain where none of the other thirty launches hung: its second hang is its own
    healthy = [rec(n, {AG: 2**20 + n}) for n in range(30)]
    assert [(b.param, b.value) for b in blames_of(tmp_path, [*healthy, *chain])] == [("p2p", True)]
