"""The report's condensed views: flags shown against what is deployed, grouped negative findings, bubble share,
trial counts."""

from __future__ import annotations

from flagopt.report import report_data
from flagopt.report._bubble import realized
from flagopt.report._diff import changed, changed_text
from flagopt.report._negative import MAX_LOOSE, Finding, negative_lines
from flagopt.study import settings_text

SPACE = {"baseline": {"xla_flags": "--xla_lhs=true --xla_ag=8589934592", "env": {"NCCL_PROTO": "Simple"},
                      "args": {"microbatches": 4}, "defaults": {"xla_pipelined": False, "xla_lhs": False}}}


def test_changed_drops_values_already_in_effect():
    settings = {"xla": {"xla_lhs": True, "xla_ag": 1073741824, "xla_pipelined": False, "xla_new": 2},
                "env": {"NCCL_PROTO": "Simple", "CUDA_DEVICE_MAX_CONNECTIONS": 1}, "args": {"microbatches": "4"}}
    diff = changed(settings, SPACE)
    # deployed value (lhs), image default of an undeployed flag (pipelined), deployed env and arg all drop out
    assert diff["xla"] == {"xla_ag": 1073741824, "xla_new": 2}
    assert diff["env"] == {"CUDA_DEVICE_MAX_CONNECTIONS": 1} and diff["args"] == {}
    # the deployed value wins over the declared image default for the same flag
    assert changed({"xla": {"xla_lhs": False}}, SPACE)["xla"] == {"xla_lhs": False}
    assert changed_text({"xla": {"xla_lhs": "True"}}, SPACE) == "(same as deployed)"
    assert changed_text({}, SPACE) == ""


def test_leaderboard_flags_show_only_what_differs_from_deployed(fsdp, pp):
    checked = 0
    for data in (fsdp, pp):
        rows = {r.trial: r for r in (*report_data(data).top, *report_data(data).bottom)}
        for arm in data.arms:
            row = rows.get(arm.first.number) or (rows.get(arm.runs[0].number) if arm.runs else None)
            if row is None or arm.kind == "baseline-no-env":
                continue
            full = arm.first.attrs.get("settings") or {}
            assert row.flags == changed_text(full, data.space)
            kept = settings_text(changed(full, data.space)).split()
            assert set(kept) <= set(settings_text(full).split())
            checked += 1
    assert checked >= 4


def _f(label, tokens, gain, *, how="hurts", sampled=True):
    return Finding(label, " ".join(tokens), tuple(tokens), gain, gain - 1, gain + 1, 1, how, sampled)


def test_negative_findings_group_a_discriminating_setting():
    bad = [_f(f"s#{i}", ("P=LL", f"A={i % 2}"), -10.0 - i) for i in range(4)]
    mild = [_f(f"s#{i}", ("P=Simple", f"A={i % 2}"), -2.5, how="probably hurts") for i in range(4, 8)]
    fine = [_f(f"s#{i}", ("P=Simple", f"A={i % 2}"), 0.5, how="") for i in range(8, 10)]
    named = [_f("lhs_off", ("L=false",), -3.0, sampled=False)]
    lines = negative_lines([*bad, *mild, *fine, *named], ["**crashy** `X=1` fails: crash"])
    assert lines[0].startswith("**lhs_off**")  # named profiles one by one
    patterns = [line for line in lines if line.startswith("**`")]
    # P=LL separates the worst configurations from the rest; A=0/A=1 occur on both sides and are not blamed
    assert len(patterns) == 1 and patterns[0].startswith("**`P=LL`**")
    assert all(f.label in patterns[0] for f in bad) and "-13.00" in patterns[0]
    listed = [line for line in lines if line.startswith("**s#")]
    assert len(listed) == min(len(mild), MAX_LOOSE) and not any(f"**{f.label}**" in "\n".join(lines) for f in bad)
    assert not any(f.label in "\n".join(lines) for f in fine) and lines[-1].endswith("fails: crash")


def test_negative_findings_cap_the_unexplained_sampled_configurations():
    loose = [_f(f"s#{i}", (f"K={i}",), -5.0 - i) for i in range(MAX_LOOSE + 3)]
    lines = negative_lines(loose, [])
    assert sum(line.startswith("**s#") for line in lines) == MAX_LOOSE
    assert lines[-1].startswith("3 more sampled configurations hurt") and "s#2" in lines[-1]
    assert "**s#" + str(MAX_LOOSE + 2) in lines[0]  # worst first


def test_bubble_share_is_measured_over_predicted():
    assert realized(0.1111, 0.0204) == "18 %"
    assert realized(0.1765, -0.0051).startswith("opposite sign")
    assert realized(0.0, 0.0) == "" and realized(0.1, None) == ""


def test_trials_header_counts_statuses_and_kinds(fsdp):
    rep = report_data(fsdp)
    line = dict(rep.header)["Trials"]
    recs = fsdp.all_records
    assert line.startswith(f"{len(recs)} trials: {sum(r.ok for r in recs)} ok")
    for kind in {r.kind for r in recs}:
        assert f"{sum(r.kind == kind for r in recs)} {kind}" in line
