"""When a reproduced hang is the configuration's and when it is the cluster's (pure, over run records).

A hang is retried as the infrastructure's. Where nothing else hangs, a configuration that hangs again is deadlocking
(issue 23: a flag hung four times before anything learned it); where other launches hang too, two hangs of one
configuration can be the cluster's, and blaming them takes a setting out of the study for good.
"""

from __future__ import annotations

from collections.abc import Sequence

from scipy import stats

from flagopt.decide._runs import CANCELLED, INVALID, RUNNING, RunRecord

#: A reproduced hang is the configuration's when that many hangs of its launches would happen less often than this at
#: the rate the study's other launches hang (:func:`hangs_beyond_the_cluster`): one in a thousand, as a study tests
#: the failed runs of some thirty configurations and a false blame takes a setting out of the study for good.
REPRODUCED_LEVEL = 0.001
#: The prior of that rate (hangs, launches): a healthy cluster hangs about once in a hundred launches, so two hangs
#: of one configuration, with none elsewhere, are its own.
_HANG_PRIOR = (0.1, 10.0)


def hangs_beyond_the_cluster(records: Sequence[RunRecord], failure_class: str, key: str) -> bool:
    """Whether configuration ``key``'s failures of ``failure_class`` are more than the cluster's: fewer than
    :data:`REPRODUCED_LEVEL` of the time would its launches fail that often at the rate the study's other launches
    (controls included) fail that way.

    On a cluster where nothing else hangs, a configuration's second hang is its own (issue 23: a flag hung four times
    before anything learned it). Where other launches hang too, two hangs of one configuration are what the cluster
    does: on the flaky landscape (3 % of launches hang), the +7 % winner's one-factor probe hung, timed out on the
    coordination service, and hung again in three launches; blamed, it was never run again, and the study ended
    `null` (flaky-50020, docs/benchmark-decisions.md, fifty-eighth-session note).

    Example:
        >>> from flagopt.decide._runs import RunRecord
        >>> def run(n, key, status="ok", cls=None):
        ...     return RunRecord(n, "probe", "", key, status, 1.0 if status == "ok" else None, float(n), None,
        ...                      attrs={"failure_class": cls} if cls else {})
        >>> hung = [run(20, "k", "flake", "hang"), run(21, "k", "flake", "hang")]
        >>> hangs_beyond_the_cluster([run(n, f"o{n}") for n in range(20)] + hung, "hang", "k")
        True
        >>> elsewhere = [run(n, f"o{n}", *(("flake", "hang") if n % 6 == 0 else ())) for n in range(20)]
        >>> hangs_beyond_the_cluster(elsewhere + hung, "hang", "k")
        False
    """
    launched = [r for r in records if r.config_key and r.status not in (CANCELLED, RUNNING, INVALID)]
    mine = [r for r in launched if r.config_key == key]
    others = [r for r in launched if r.config_key != key]
    count = sum(1 for r in mine if r.attrs.get("failure_class") == failure_class)
    hangs, launches = _HANG_PRIOR
    rate = (sum(1 for r in others if r.attrs.get("failure_class") == failure_class) + hangs) / (len(others) + launches)
    return float(stats.binom.sf(count - 1, len(mine), rate)) < REPRODUCED_LEVEL
