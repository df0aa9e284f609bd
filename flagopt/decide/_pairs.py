"""Rows that set together the pairs of few-level settings no run has set together: before a `null` verdict, a pair
that only pays in company (an NCCL protocol and double buffering, each nothing or worse alone) is in some run.

The screen's rows hold the settings that measured near or above zero; a pair whose halves read zero and -1.9 % alone
is in none of them, and no additive model predicts it (rand-win-5020: LL128 with double buffering +9.1 %, the study
ended `null` with a +7.3 % best; rand-win-5061: Tree with pipelined p2p +8.4 %). A strength-two covering design over
the booleans and named categoricals: every row sets each boolean's other value and one value of each categorical,
greedily the values that set most pairs not yet run together. A row is an arm like any other: one that measures near
the win bar is a contender, and the race and its drop-ones take it from there.

Example:
    >>> from flagopt.space import Param
    >>> ps = [Param("a", "xla", "a", choices=(False, True)), Param("p", "env", "P", choices=("x", "y", "z"))]
    >>> covering_rows(ps, {"a": "false", "p": None}, set(), lambda n, v: False, 3)
    [{'p': 'x', 'a': True}, {'p': 'y', 'a': True}, {'p': 'z', 'a': True}]

Around a confirmed winner the rows keep its settings and pair each of them with the values it does not set (a
categorical of its own may take another value): a companion that pays only beside the winner's protocol reads zero or
worse alone, and add-ones take only what measured above zero (rand-win-1021: pipelined p2p, -0.9 % measured alone,
+4.9 % beside the winner's Simple; rand-win-1019: LL128, +0.2 % alone, +4 % more than Simple beside the winner's
pipelined all-gather).

On top of the best recipe (a catalog profile with flags the space does not offer) the rows set the values no run set
beside the recipe's own flags, while nothing is near the win bar (:func:`recipe_pair_row`; rand-recipe-100001: Tree,
-1.9 % alone, +12 % beside the recipe's flags).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from flagopt.decide import _design as design
from flagopt.decide import _grid as grid
from flagopt.decide._arms import Arm
from flagopt.decide._blame import Blame, blamed_by, excluded_by
from flagopt.decide._model import EffectsModel
from flagopt.decide._plan import Plan
from flagopt.decide._runs import RunRecord
from flagopt.space import Param, Space, TrialConfig, render_value

#: The design label of these rows.
PAIRS = "pairs"
#: The design label of the rows on top of a recipe (:func:`recipe_pair_row`).
RECIPE_PAIRS = "recipe-pairs"
#: The design of a pair row around a winner run again without its values that cost alone (:meth:`PairRows.unmasked`).
PAIRS_UNMASKED = "pairs-unmasked"
#: At most this many rows a study: one per value of the widest categorical covers every boolean beside it, and a
#: null study pays for each row (its median runs target is 35).
MAX_PAIR_ROWS = 3

#: A setting the model puts more than the win bar below the deployed job alone (its effect plus this many standard
#: errors below minus the bar) goes into no row. One error, not two: rand-win-70028's scheduler off read -6.1 % with a
#: 0.67 % error and spoiled the row that set the +7.8 % pair (tests/decisions/test_pair_rows.py).
COSTLY_SE = 1.0

#: The categorical values' combinations a row is chosen from, at most (four categoricals of eight values).
MAX_COMBOS = 4096

Pair = frozenset[tuple[str, Any]]


def few_level(param: Param) -> bool:
    """A boolean or a categorical of named values (an NCCL algorithm), not numbers offered as choices."""
    return param.choices is not None and not any(isinstance(c, (int, float)) and not isinstance(c, bool)
                                                  for c in param.choices)


def pairs_of(settings: Mapping[str, Any]) -> set[Pair]:
    return {frozenset(p) for p in itertools.combinations(settings.items(), 2)}


def covering_rows(params: Sequence[Param], deployed: Mapping[str, str | None], covered: set[Pair],
                  excluded: Callable[[str, Any], bool], limit: int,
                  base: Mapping[str, Any] | None = None,
                  rank: Callable[[str, Any], float] | None = None) -> list[dict[str, Any]]:
    """Up to ``limit`` rows over the few-level ``params`` (their values other than the deployed one, none
    ``excluded``) that set the most pairs not in ``covered``, greedily; none once every pair is covered.

    ``base``: the settings every row keeps (a winner's); a categorical it sets may take its other values, but a row
    that keeps more of its values comes first (it keeps the winner's gain), and where the pairs tie the values of
    the others go best ``rank`` first."""
    base = base or {}
    values = {p.name: [v for v in grid.probe_values(p, deployed.get(p.name))
                       if not excluded(p.name, v) or base.get(p.name) == v] for p in params if few_level(p)}
    values = {n: ([base[n]] if isinstance(base[n], bool) else sorted(vs, key=lambda v: v != base[n])) if n in base
              else sorted(vs, key=lambda v: -rank(n, v)) if rank else vs for n, vs in values.items() if vs}
    wanted = {pair for a, b in itertools.combinations(values, 2) for x in values[a] for y in values[b]
              for pair in [frozenset({(a, x), (b, y)})]} - covered
    single = {n: vs[0] for n, vs in values.items() if len(vs) == 1}  # the booleans: one value to set
    wide = [n for n in values if n not in single]
    rows: list[dict[str, Any]] = []
    while wanted and len(rows) < limit:

        def score(row: dict[str, Any]) -> tuple[int, float]:
            # a pair beside a one-value setting counts more: two categoricals of three values have nine pairs that
            # three rows cannot cover, and the rows are spent on each categorical value beside every boolean. Around
            # a winner, a row that keeps its values comes first: it measures what the winner gains with the pairs
            # (stress-winner-pair-1: LL set more new pairs than the winner's Simple, and its row read 6 points low)
            new = pairs_of(row) & wanted
            kept = sum(1 for n, v in base.items() if row.get(n) == v) if new else 0
            return kept, len(new) + 0.5 * sum(1 for pair in new if any(n in single for n, _ in pair))

        combos = itertools.islice(itertools.product(*(values[n] for n in wide)), MAX_COMBOS)
        row = max(({**dict(zip(wide, combo)), **single} for combo in combos), key=score)
        row = {n: v for n, v in row.items() if n not in single or n in base or any(
            frozenset({(n, v), other}) in wanted for other in row.items() if other[0] != n)}
        new = pairs_of(row) & wanted
        if not new:
            break
        rows.append(row)
        wanted -= new
    return rows


def covered_pairs(space: Space, records: Sequence[RunRecord]) -> set[Pair]:
    """The pairs of settings some successful run (not a control) set together."""
    out: set[Pair] = set()
    for rec in records:
        if rec.ok and not rec.is_baseline:
            out |= pairs_of(design.settings_of_record(space, rec.attrs.get("settings") or {}))
    return out


def pair_row(space: Space, deployed: Mapping[str, str | None], records: Sequence[RunRecord], blames: Sequence[Blame],
             tried: set[str], in_flight: int = 0, *, base: Mapping[str, Any] | None = None,
             base_label: str = "", rank: Callable[[str, Any], float] | None = None,
             costly: Callable[[str, Any], bool] | None = None) -> TrialConfig | None:
    """The next covering row no run has set (``tried``: config keys run or in flight; ``in_flight``: rows of this
    design still running), or ``None`` once ``MAX_PAIR_ROWS`` were asked or every pair ran together; ``base``: around
    this winner (``base_label``), whose rows have a budget of their own (the runs after a winner, ``phase: refine``),
    each value it does not set chosen best ``rank`` first (the model's effect) where the pairs tie; ``costly``: values
    no row sets (one that costs more than the win bar alone hides every other pair of its row).

    A row that failed as its settings do together (blamed in company) is run without the blamed settings but one.
    """
    around = base is not None
    asked = in_flight + sum(1 for r in records if r.attrs.get("design") == PAIRS and not r.stopped_with_driver
                            and (r.attrs.get("phase") == "refine") == around)
    if asked >= MAX_PAIR_ROWS or 0 < grid.configurations(space.params, deployed, excluded=excluded_by(blames)) \
            < space.stop.max_null:
        return None  # a small space is measured to its last configuration (Stopping.remaining)
    base = base or {}
    blamed = excluded_by(blames)
    excluded = blamed if costly is None else (lambda name, value: blamed(name, value) or costly(name, value))
    for row in covering_rows(space.params, deployed, covered_pairs(space, records), excluded,
                             MAX_PAIR_ROWS - asked, base, rank):
        row = {**base, **row}
        while (blame := blamed_by(blames, row)) is not None and len(row) > 2:
            members = [n for n, _, _ in reversed(blame.members()) if n in row and row[n] != base.get(n)]
            if not members:
                break
            row.pop(members[0])
        new = {n: v for n, v in row.items() if base.get(n) != v}
        label = ", ".join(design.probe_label(space.param(n), v) for n, v in new.items())
        label = f"{base_label} with pairs no run set together: {label}" if around \
            else f"pairs no run set together: {label}"
        config = design.config_of_settings(space, row, kind="probe", profile=label)
        if len(row) >= 2 and new and config.config_key not in tried and blamed_by(blames, row) is None:
            return config
    return None


def recipe_pair_row(space: Space, deployed: Mapping[str, str | None], base: Mapping[str, Any], base_label: str,
                    records: Sequence[RunRecord], asked: Sequence[Mapping[str, Mapping[str, Any]]],
                    excluded: Callable[[str, Any], bool]) -> tuple[dict[str, Any], str] | None:
    """The settings and label of the next row on top of a recipe (``base``, a catalog profile's settings with flags
    of its own, labelled ``base_label``) that sets the few-level values no run has set beside the recipe's own flags,
    or ``None`` once ``MAX_PAIR_ROWS`` rows were ``asked`` (this design's runs' settings, in flight included) or every
    such value ran beside them. Row by row: the next value of each categorical, and its share of the booleans'.

    A recipe's own flag may pay only with a value the recipe does not set, and that value may cost alone: its add-one
    takes what measured above zero alone (rand-recipe-100001: NCCL_ALGO=Tree cost 1.9 % alone and pays 12 % beside
    the recipe's cudnn fMHA, triton and rematerialization flags; no run set it there, and the study ended on
    `budget` at +3.0 %). A row like any other arm: one that measures near the win bar is a contender.
    """
    own = {n: v for n, v in base.items() if design.is_own_setting(n)}
    if not own or len(asked) >= MAX_PAIR_ROWS:
        return None
    beside: set[tuple[str, str]] = set()
    ran = [design.settings_of_record(space, r.attrs.get("settings") or {}) for r in records
           if r.ok and not r.is_baseline] + [design.settings_of_record(space, s) for s in asked]
    for settings in ran:
        if all(render_value(settings.get(n)) == render_value(v) for n, v in own.items()):
            beside |= {(n, render_value(v)) for n, v in settings.items()}
    wanted = {p.name: [v for v in grid.probe_values(p, deployed.get(p.name))
                       if (p.name, render_value(v)) not in beside and not excluded(p.name, v)
                       and render_value(v) != render_value(base.get(p.name))]
              for p in space.params if few_level(p)}
    wanted = {n: vs for n, vs in wanted.items() if vs}
    if not wanted:
        return None
    # as many rows as the widest categorical has values left (one where only booleans are): the booleans are shared
    # out over them, so that no row stacks every value that costs a little alone
    rows_left = max(1, min(MAX_PAIR_ROWS - len(asked), max((len(vs) for vs in wanted.values()), default=1)))
    singles = [n for n, vs in wanted.items() if len(vs) == 1]
    take = set(singles[:math.ceil(len(singles) / rows_left)])
    row = {n: vs[0] for n, vs in wanted.items() if len(vs) > 1 or n in take}
    label = f"{base_label} + values no run set beside its own flags: " + ", ".join(
        design.probe_label(space.param(n), v) for n, v in row.items())
    return {**base, **row}, label


class PairRows:
    """Part of :class:`~flagopt.decide.Planner` (through the screen): when the pair rows are due, and which setting
    they leave out for its cost."""

    space: Space
    deployed: dict[str, str | None]
    _model: EffectsModel | None
    blames: Callable[[Sequence[RunRecord]], list[Blame]]
    contender: Callable[..., Arm | None]
    candidates: Callable[..., list[Arm]]
    eligible: Callable[[Sequence[Arm]], list[Arm]]
    past_null: Callable[[Sequence[Arm]], list[Arm]]
    race_room: Callable[[Sequence[RunRecord]], int]
    far_from_confirmed: Callable[..., bool]
    within_reach: Callable[[float, int], float]
    _effect: Callable[[EffectsModel | None, str, Any], float]

    def pair_row_due(self, records: Sequence[RunRecord], arms: Sequence[Arm], in_flight: Sequence[Plan] = (),
                     blames: Sequence[Blame] | None = None, around: Arm | None = None) -> TrialConfig | None:
        """The next row of the pairs no run has set together (:func:`pair_row`), when it is the screen's last proposal:
        no contender whose race is short (:meth:`far_from_confirmed`), nothing near the win bar, not even one setting
        alone (win10-1023), and, while a `null` verdict is still possible, nothing left to race against the null bar
        (stress-combo-oom-3: a +3 % threshold's race waited behind the rows). No null verdict is drawn while one is
        due. ``around``: the confirmed winner, whose settings every row keeps.

        Once an arm is confirmed better by ``stop.null_gain`` the races left only choose among configurations short of
        the win bar, and the rows go first (stress-hidden-pair: studies raced +2 % arms for their last 20 runs and
        ended on `budget` at +2 % of a +9.85 % pair; within 1 % 76 -> 94 of 120 over four seed sets)."""
        if not self.space.screen:
            return None
        if around is None:
            room = self.race_room(records)
            if self.contender(arms, room=room) is not None or self.near_the_bar(arms, room=room):
                return None
            if not self.past_null(arms) and self.candidates(arms, in_flight):
                return None
        tried = {r.config_key for r in records if not r.stopped_with_driver} | {p.config.config_key for p in in_flight}
        base = design.settings_of_record(self.space, around.first.attrs.get("settings") or {}) if around else None
        return pair_row(self.space, self.deployed, records, self.blames(records) if blames is None else blames, tried,
                        sum(1 for p in in_flight if p.attrs.get("design") == PAIRS), base=base,
                        base_label=around.label if around else "",
                        rank=(lambda n, v: self._effect(self._model, n, v)) if around else None,
                        costly=self.costs_the_bar)

    def near_the_bar(self, arms: Sequence[Arm], *, room: float | None = None) -> bool:
        """Whether some arm, even one setting alone, is within ``sigma / sqrt(n)`` of the win bar (win10-1023);
        with ``room`` (the budget's runs before its last), one whose race is not long there
        (:meth:`far_from_confirmed`)."""
        return any(a.estimate.gain >= self.within_reach(self.space.stop.win, a.n)
                   and not (room is not None and self.far_from_confirmed(a, room)) for a in self.eligible(arms))

    def costs_the_bar(self, name: str, value: Any) -> bool:
        """Whether the model puts one setting alone more than the win bar below the deployed job, by ``COSTLY_SE``
        standard errors: a pair row that sets it reads that much low, and every other pair of the row is hidden
        (rand-win-60013: all three rows set the latency-hiding scheduler off, -15 % alone, and the +7.9 % of Simple
        with NVLS, zero each alone, read -8 %; the study ended `null`). A pair with it would need an interaction of
        twice the bar to win."""
        if self._model is None:
            return False
        effect, se = self._model.effect(name, value)
        return effect + COSTLY_SE * se < -self.space.stop.win

    def unmasked(self, arms: Sequence[Arm], leader: Arm) -> Iterator[tuple[dict[str, Any], str]]:
        """Around the confirmed winner ``leader``: each pair row that read more than ``stop.win`` below it, without
        its values that cost more than ``stop.null_gain`` alone (the model's effect): ``(settings, label)``, the
        lowest row first; only where what is left still sets two values or more, one of them a value the winner does
        not set (one value alone is its own probe).

        A row sets every boolean's other value, and two values that each cost a few points alone hide every pair
        beside them: the sum of its parts explains its shortfall, and nothing marks the pair. On rand-win-170025
        NVLS with pipelined reduce-scatter pays +14.2 % only together; their row around Ring (+6.6 %) also set
        double buffering (-3.8 % alone, -16 % beside NVLS) and the scheduler off (-3.1 %), read -10.6 %, and the
        study ended on Ring with 35 runs of its budget left. A value that costs alone is asked in its own rows; here
        the rest of the row is asked without it, once. Where the winner already set one half of the pair the rest is
        one swap from it, and still a pair no run set (stress-row-conflict-250001: the winner Ring with the pipelined
        reduce-scatter; its NVLS row read -10.2 %, and NVLS with the reduce-scatter, +14.2 %, ran only once the rest
        no longer had to set two values the winner does not; within 1 % 20 -> 27 of 30 there, 12 -> 26 at 260000+).
        """
        if self._model is None:
            return
        stop = self.space.stop
        base = design.settings_of_record(self.space, leader.first.attrs.get("settings") or {})
        rows = []
        for arm in self.eligible(arms):
            if arm.first.attrs.get("design") != PAIRS or arm.first.attrs.get("phase") != "refine" \
                    or arm.estimate.gain >= leader.estimate.gain - stop.win:
                continue  # only the rows around a winner (phase: refine) that read far below this one
            settings = design.settings_of_record(self.space, arm.first.attrs.get("settings") or {})
            costly = {n for n, v in settings.items()
                      if base.get(n) != v and self._effect(self._model, n, v) < -stop.null_gain}
            rest = {n: v for n, v in settings.items() if n not in costly}
            if costly and len(rest) >= 2 and any(base.get(n) != v for n, v in rest.items()):
                rows.append((arm.estimate.gain, arm.label, rest, sorted(costly)))
        for _, label, rest, costly in sorted(rows, key=lambda r: (r[0], r[1])):
            yield rest, f"{label} without what costs alone: " + ", ".join(costly)
