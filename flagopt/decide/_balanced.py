"""Two-level balanced designs over the settings the effects model has not ruled out: the balanced screen's (before
any winner) and a winner's companions' (statistics.md §9, §10). Each row informs every factor's effect; a design is
fixed once its first row runs."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from scipy.linalg import hadamard

from flagopt.decide import _design as design
from flagopt.decide._arms import Arm
from flagopt.decide._blame import Blame, blamed_by
from flagopt.decide._model import EffectsModel
from flagopt.decide._runs import RunRecord
from flagopt.space import Space, TrialConfig

#: The companions of a confirmed winner in its balanced design: the settings it does not set whose best value is
#: within this many standard errors of zero or above (a +0.5 % setting measured once at -2 % is still in).
COMPANION_SE = 2.0
#: The same for the balanced screen before any winner, wider: a setting that reads slightly harmful alone may be half
#: of a pair that only helps together, and only a row that sets both can show it (rand-win-1012: double buffering,
#: -0.6 +- 0.3 % alone, with the pipelined reduce-scatter +6 %; two standard errors left it out of every row and the
#: study ended `null`). Measured on three seed sets in docs/benchmark-decisions.md (fourteenth-session note).
SCREEN_SE = 3.0
#: At most this many companions (an 8-run two-level design), the largest pooled effects first; and its runs a study.
MAX_COMPANIONS = 7
MAX_COMPANION_RUNS = 8
#: The design label of the balanced screen's rows (before any winner), and of the winner's companions' rows.
BALANCED = "balanced"
COMPANIONS = "companions"
#: A balanced design once drawn: the configuration it is drawn on top of (its key), its first row's record number
#: (None before that row runs), and its rows (each row's settings, the design's size).
FixedDesign = tuple[str, int | None, list[tuple[dict[str, Any], int]]]


class BalancedDesigns:
    """Part of :class:`~flagopt.decide.Planner` (through the proposals): the rows of its balanced designs."""

    space: Space
    _designs: dict[str, FixedDesign]
    _model: EffectsModel | None
    model: Callable[[Sequence[RunRecord]], EffectsModel | None]
    contender: Callable[[Sequence[Arm]], Arm | None]
    combination_ran: Callable[[Sequence[RunRecord]], bool]
    _sure: Callable[[EffectsModel, str, Any], bool]

    def balanced_row(self, records: Sequence[RunRecord], arms: Sequence[Arm], blames: Sequence[Blame],
                     tried: set[str], *, ahead: bool = False) -> tuple[TrialConfig, str, str] | None:
        """The next row of the balanced screen: ``(config, reason, design)``, or ``None`` when it is done or not due.

        Due after the first combination (``ahead``: while it still runs on another slot), while no configuration is
        near the win bar (no contender). The one-factor probes have left each setting's effect to about two runs:
        where the best is several +0.3-2 % settings (rand-below, below5, h200x2, pair before its pair is found),
        those single comparisons cannot tell them apart and the combination is built from noise. A two-level
        Hadamard design over each param's best value not ruled out (up to seven, eight runs; the settings the model
        is sure of held in every row) measures every such effect in every run, with variance 4 sigma^2 / N against
        2 sigma^2 for a probe against a control, in the company of the others. Its rows inform the effects model;
        they are not raced themselves (the model's next combination carries what they found), and no null verdict
        is drawn while the design is unfinished. Measured in docs/benchmark-decisions.md (tenth-session note).
        """
        if self._model is None or self.contender(arms, room=self.race_room(records)) is not None \
                or not (ahead or self.combination_ran(records)):
            return None
        for i, (settings, size) in enumerate(self._balanced_rows(records, blames)):
            label = f"balanced screen {i + 1}/{size}: " + ", ".join(
                design.probe_label(self.space.param(n), v) for n, v in settings.items())
            config = design.config_of_settings(self.space, settings, kind="probe", profile=label)
            if settings and config.config_key not in tried and blamed_by(blames, settings) is None:
                return config, "a balanced design of the settings the probes have not ruled out", BALANCED
        return None

    def _balanced_rows(self, records: Sequence[RunRecord], blames: Sequence[Blame]) -> list[tuple[dict[str, Any], int]]:
        """The balanced screen's rows (each row's settings, the design's size), fixed once its first row is run
        (re-drawn from every fit, on four slots null studies ran rows of three designs and 44 runs instead of 37)."""
        first = next((r.number for r in records if r.attrs.get("design") == BALANCED), None)
        names = {p.name for p in self.space.params}

        def draw(model: EffectsModel, earlier: Sequence[RunRecord]) -> list[tuple[dict[str, Any], int]]:
            sure = {n: v for n, (v, _, _) in model.best_values().items() if n in names and self._sure(model, n, v)}
            return [({**sure, **extra}, size) for extra, size in self.design_rows(model, sure, blames, earlier,
                                                                                label=BALANCED)]

        return self.fixed_design(BALANCED, "", first, records, self._model, draw)

    def companion_rows(self, model: EffectsModel, leader: Arm, blames: Sequence[Blame],
                       records: Sequence[RunRecord]) -> list[tuple[dict[str, Any], int]]:
        """The rows of a two-level balanced design (Hadamard, 4 or 8 runs) over the winner's companions: each row
        the settings to add to ``leader``, with the design's size; empty once the study ran ``MAX_COMPANION_RUNS``.

        Each run of it informs every companion's pooled effect (variance 4 sigma^2 / N each, against 2 sigma^2 for one
        add-one run against a control), and its contrasts are within one block of time, so a control that came out
        high shifts every row alike. The add-one that follows takes the companions the pooled effects then favour.

        Three companions take ``hadamard(4)``: one row adds all three, each of the others one of them; four to seven
        take ``hadamard(8)``: one row adds all, each of the others three.

        The design is fixed once its first row is run, as the balanced screen's: re-drawn from every fit, it lost a
        companion under its own rows (rand-win-21: after the row that added two settings came out low, the row that
        added NVLS alone, +5.6 points, was never run). A resumed study draws it again from the runs before that row.
        """
        base = design.settings_of_record(self.space, leader.first.attrs.get("settings") or {})
        mine = [r for r in records if r.attrs.get("design") == COMPANIONS and not r.stopped_with_driver]
        if len(mine) >= MAX_COMPANION_RUNS:
            return []
        # A row is known by its label (one that swaps a rival value in does not extend ``base``).
        on_top = companion_label(leader.label)
        first = next((r.number for r in mine if r.profile.startswith(on_top) or _extends(self.space, r, base)), None)

        def draw(drawn_from: EffectsModel, earlier: Sequence[RunRecord]) -> list[tuple[dict[str, Any], int]]:
            return self.design_rows(drawn_from, base, blames, earlier, label=COMPANIONS)

        return self.fixed_design(COMPANIONS, leader.config_key, first, records, model, draw)

    def fixed_design(self, label: str, key: str, first: int | None, records: Sequence[RunRecord],
                     model: EffectsModel | None,
                     draw: Callable[[EffectsModel, Sequence[RunRecord]], list[tuple[dict[str, Any], int]]]
                     ) -> list[tuple[dict[str, Any], int]]:
        """The rows of design ``label`` (for ``key``: the configuration it is drawn on top of), fixed once its
        first row (record number ``first``) is run.

        Each decision re-fits the model, and a design re-drawn from every fit changes its factors under its own
        rows. Until its first row runs it is drawn from ``model``; a resumed study (nothing cached) draws it again
        with the model of the runs before that row, so it gets the same rows.
        """
        cached = self._designs.get(label)
        if cached is not None and cached[0] == key and cached[1] in (first, None):
            self._designs[label] = (key, first, cached[2])
            return cached[2]
        earlier = [r for r in records if first is None or r.number < first]
        drawn_from = model if first is None else self.model(earlier)
        rows = draw(drawn_from, earlier) if drawn_from is not None else []
        if first is not None or rows:
            self._designs[label] = (key, first, rows)
        return rows

    def rival_values(self, model: EffectsModel, base: dict[str, Any],
                     blames: Sequence[Blame]) -> list[tuple[str, Any]]:
        """Each param ``base`` sets, with its best other value that some run set, where the runs do not rule that
        value out against ``base``'s (within ``COMPANION_SE`` standard errors of the difference): closest first.

        A row that sets it swaps it in for ``base``'s value; the deployed value is the drop-one variants' question.
        """
        names = {p.name for p in self.space.params}
        rivals = []
        for name, value in base.items():
            if name not in names:
                continue
            own, own_se = model.effect(name, value)
            others = [(*model.effect(name, v), v) for v in model.values.get(name, ())
                      if v != value and blamed_by(blames, {**base, name: v}) is None]
            if not others:
                continue
            effect, se, rival = max(others, key=lambda o: (round(o[0], 9), str(o[2])))
            if effect + COMPANION_SE * math.hypot(se, own_se) >= own:
                rivals.append((round(own - effect, 9), name, rival))
        return [(name, rival) for _, name, rival in sorted(rivals, key=lambda r: (r[0], r[1]))]

    def design_rows(self, model: EffectsModel, base: dict[str, Any], blames: Sequence[Blame],
                    records: Sequence[RunRecord], *, label: str) -> list[tuple[dict[str, Any], int]]:
        """The rows of a two-level balanced design on top of ``base`` (see :meth:`companion_rows`) over the params
        ``base`` does not set whose best value is not ruled out (``SCREEN_SE`` or ``COMPANION_SE``; for a winner's
        companions, the catalog profiles' own settings too), and in the design's spare columns (for a winner's
        companions, first its tied rival values, :meth:`rival_values`) those that lost less than
        ``stop.null_gain`` alone, each at that value or left deployed; empty once the study ran
        ``MAX_COMPANION_RUNS`` runs of design ``label``."""
        if sum(1 for r in records if r.attrs.get("design") == label and not r.stopped_with_driver) \
                >= MAX_COMPANION_RUNS:
            return []
        names = {p.name for p in self.space.params}
        within = SCREEN_SE if label == BALANCED else COMPANION_SE
        # A winner's companions include a catalog profile's own settings (``target:key``), each in a column of its
        # own: a recipe's settings the space does not offer may pay on top of a winner that lacks the recipe's
        # other settings (rand-recipe-1028: the recipe's triton_gemm=false took the winner from +6.7 to +13.6 %,
        # its rematerialization pass, set with it, cost more than the winner gained from both).
        own = label == COMPANIONS
        allowed = sorted(((effect, se, name, value) for name, (value, effect, se) in model.best_values().items()
                          if (name in names or own and design.is_own_setting(name)) and name not in base
                          and blamed_by(blames, {**base, name: value}) is None),
                         key=lambda f: (-round(f[0], 9), f[2]))  # ties by name, not by the last digits
        factors = [(name, value) for effect, se, name, value in allowed if effect + within * se > 0.0][:MAX_COMPANIONS]
        if len(factors) < 2:
            return []  # one companion is the add-one variant's question
        size = 4 if len(factors) <= 3 else 8
        # The design's size has room for more columns: they take the settings that lost less than ``stop.null_gain``
        # alone. A row costs the same with them, and only a row that sets both halves of a pair that pays together
        # can show it (pair-3009: double buffering, -0.8 +- 0.3 % alone, was ruled out by a hair, and the study
        # ended `null` on a +8 % pair).
        if own:
            # The spare columns first swap in a rival value of a setting the winner carries that the runs cannot tell
            # from its own: that value may be the half of a pair that pays only with a companion (rand-win-12009:
            # the winner carried NCCL_PROTO=LL128, a lucky tie with Simple, and double buffering pays +5.9 % with
            # Simple alone; no run set the two together and the study ended 6.4 points short of the best).
            factors += self.rival_values(model, base, blames)[:size - 1 - len(factors)]
        factors += [(name, value) for effect, _, name, value in allowed if (name, value) not in factors
                    and effect > -self.space.stop.null_gain][:size - 1 - len(factors)]
        signs = hadamard(size)[:, 1:len(factors) + 1]
        return [({n: v for (n, v), sign in zip(factors, row) if sign > 0}, size) for row in signs]


def companion_label(leader_label: str, row: int | None = None, size: int = 0, settings: str = "") -> str:
    """The label of row ``row`` (from 0) of a design of ``size`` rows on top of the winner ``leader_label`` that sets
    ``settings``; without ``row``, what every row's label begins with.

    Example:
        >>> companion_label("Tree", 0, 4, "pipe=True")
        'Tree + companions 1/4: pipe=True'
    """
    prefix = f"{leader_label} + companions "
    return prefix if row is None else f"{prefix}{row + 1}/{size}: {settings}"


def informs_only(arm: Arm, win: float) -> bool:
    """Whether ``arm`` is a row of the balanced screen below the win bar ``win``: it informs the effects, it is
    neither raced nor a contender (one above the bar is both: rand-win-2 ended `null` with a row at +6.6 %, true
    +6.6 %, never re-run). Not from the bar less a sigma, as other contenders: on the null landscape a lucky row at
    +4 % was raced, and the study ran to the budget instead of its null verdict (held-out null-1022)."""
    return arm.first.attrs.get("design") == BALANCED and arm.estimate is not None and arm.estimate.gain < win


def _extends(space: Space, record: RunRecord, base: dict[str, Any]) -> bool:
    """Whether ``record`` set every setting of ``base`` (a row of the design on top of it)."""
    settings = design.settings_of_record(space, record.attrs.get("settings") or {})
    return all(name in settings and settings[name] == value for name, value in base.items())
