"""The budget's room: the runs kept for its end (the reserve), the runs left before them, and whether a contender's
race is too long to hold back the screen's rows in that room (docs/statistics.md §6, §10).

Example:
    >>> RACE_PATIENCE, ROWS_ROOM
    (4, 8)
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from flagopt import stats
from flagopt.decide._arms import Arm
from flagopt.decide._plan import runs_used
from flagopt.decide._runs import CANCELLED, FLAKE, INVALID, RUNNING, RunRecord
from flagopt.space import Space

#: A contender holds back the screen's balanced and pair rows while this many more fresh runs, at its measured mean,
#: would confirm it (:meth:`Room.far_from_confirmed`).
RACE_PATIENCE = 4
#: The runs the rows it no longer holds back may take: a balanced design's rows left and the pair rows.
ROWS_ROOM = 8


class Room:
    """Part of :class:`~flagopt.decide.Planner` (through the race): the budget's reserve and the room before it."""

    space: Space
    slot_count: int
    max_trials: int

    def runs_to_confirm(self, arm: Arm) -> float:
        """How many more fresh runs at the mean it measured would confirm a re-run arm as a winner
        (:func:`flagopt.stats.runs_to_clear` on its claim; 0 for an arm not re-run yet, which nothing is known to
        hold back). Example (run noise 1 %): a claim of +5.5 % on three fresh runs needs about twelve more."""
        claim = arm.claim
        if claim is None or claim.n < 2:
            return 0.0
        return stats.runs_to_clear(claim, self.space.stop.win, stats.win_confidence(self.space.noise.confidence, 1))

    def race_room(self, records: Sequence[RunRecord]) -> int:
        """The runs the budget leaves before its last runs (:meth:`reserve`)."""
        return self.max_trials - runs_used(records) - self.reserve(records)

    def far_from_confirmed(self, arm: Arm, room: float = math.inf) -> bool:
        """Whether a re-run arm's race is long: ``RACE_PATIENCE`` more fresh runs at its mean would not confirm it
        (a contender a few tenths above the bar needs some fifteen at 1 % run noise), and the rows it held back fit
        in the ``room`` the budget leaves before its last runs beside its race, or its race cannot end in that room
        anyway (rand-win-80019: a +5.5 % combination raced for 30 runs and ended on `budget`; the +12 % pair of LL
        and double buffering was in no row). Never where the rows themselves do not fit in the room: rows in the
        budget's last runs leave nothing to act on what they find (flaky-1021: three rows at run 47 of 60, in the
        reserve of a flaky cluster, and a win became a `budget` verdict)."""
        needed = self.runs_to_confirm(arm)
        return needed > RACE_PATIENCE and room >= ROWS_ROOM and (needed > room or needed + ROWS_ROOM <= room)

    def reserve(self, records: Sequence[RunRecord] = ()) -> int:
        """Runs kept at the end of the budget to confirm the best: two contenders to ``min_runs``, and a control,
        on each slot, more by the share of ``records`` the infrastructure failed (each such launch counts against the
        budget).

        On each slot: the slots run side by side, and a combination proposed with one slot's reserve left on two
        slots got one repeat before the budget ended, the other slot re-running a single probe (stress-huge on two
        slots: 2 win verdicts of 10, against 10 of 10 on one; docs/benchmark-decisions.md, fifty-second session).

        Example (``min_runs`` 3): 5 runs on a healthy cluster, 6 where one launch in six failed for the machine; 10 on
        two healthy slots.
        """
        healthy = (2 * max(self.space.noise.min_runs - 1, 1) + 1) * self.slot_count
        launched = [r for r in records if r.status not in (INVALID, CANCELLED, RUNNING)]
        flaky = sum(1 for r in launched if r.status == FLAKE) / len(launched) if launched else 0.0
        return math.ceil(healthy / (1.0 - min(flaky, 0.5)) - 1e-9)
