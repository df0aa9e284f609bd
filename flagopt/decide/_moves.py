"""Moves around the best configuration: a numeric setting moved to its better neighbour or past a worse one (a short
line search), or halfway toward a better one that fails in its company (a bisection toward that cliff, statistics.md
§12), a setting that fails beside it added with it moved short of that cliff, a categorical one swapped for a close
rival or, once, for a value worse alone; and, before any contender, the best combination with a categorical setting
swapped; before any winner, the model's combination without each part where it measured clearly below its best part
(statistics.md §10). Part of the planner through :class:`~flagopt.decide._proposals.Proposals`."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from flagopt.decide import _design as design
from flagopt.decide._arms import Arm
from flagopt.decide._blame import Blame, blamed_by
from flagopt.decide._grid import halfway
from flagopt.decide._model import EffectsModel
from flagopt.decide._plan import COMBINATION, DROPPED, asked_settings, varied_param
from flagopt.decide._runs import RunRecord
from flagopt.space import Param, Space, render_value

#: At most this many move-one variants a study (a numeric param of the winner moved to its neighbour, a categorical
#: one swapped for a close rival): a short line search, bounded like the model's proposals.
MAX_MOVES = 3
#: At most this many swap-one variants a study for each categorical param: a setting of the best configuration swapped
#: for a value that measured worse alone but may pay in company. One: on seeds 1000-3999 (docs/benchmark-decisions.md,
#: nineteenth session, before the move-one fix) three raised rand-win within 1 % less (86 against 88 %) and cost the
#: tight h200x2 budget more win verdicts. Per param and beside each value of the other categorical settings, not per
#: study: the NCCL algorithm's swap spent the study's one, and the protocol that pays only beside the algorithm was
#: never swapped (stress-cat-pair: 20 % within 1 % of the best, rand-win-9021).
MAX_SWAPS = 1
#: The design of a combination's drop-one variants where it measured clearly below its best part
#: (:meth:`Moves.conflict_drops`).
CONFLICT_DROP = "conflict-drop"
#: At most this many conflict-drop runs a study: a combination of five settings has five variants, and the model's
#: next combination may be in conflict again; the first few find the setting that spoils the others.
MAX_CONFLICT_DROPS = 6


class Moves:
    """Part of :class:`~flagopt.decide.Planner` (through the proposals): the variants one step from a configuration."""

    space: Space
    deployed: dict[str, str | None]
    _model: EffectsModel | None
    eligible: Callable[[Sequence[Arm]], list[Arm]]
    _sure: Callable[[EffectsModel, str, Any], bool]
    _sigma: float

    def neighbour(self, model: EffectsModel, base: dict[str, Any], blames: Sequence[Blame],
                  records: Sequence[RunRecord], *, categorical_only: bool = False) -> tuple[str, Any, str] | None:
        """A numeric param of the winner ``base`` moved one step to its better measured neighbour (not the deployed value:
        dropping the setting is the drop-one variant's question), past a worse one to a value the runs show clearly
        better, or a categorical one swapped for another value
        (:meth:`_rival`): ``(name, value, design)``, the design ``move-one`` or ``swap-one``. Where the better
        neighbour fails beside the rest of ``base``, the move goes halfway toward it instead (:meth:`_toward_cliff`).

        Its value came from single probes a run's noise apart (pp64: an overlap limit of 4 measured once +6.3 %,
        true +3.5 %, beat 3, true +5.0 %; the winner kept it in 6 of 30 seeds, 1.6-1.8 pp short of the best). The
        neighbour is tried unless the model says it is worse by more than one standard error; the best of the two
        by the pooled effects. A categorical value (an NCCL algorithm or protocol) has no neighbours, only rivals:
        each measured value the model cannot tell from the winner's, best first (rand-below-1027: NVLS measured
        +1.5 % once, true 0, beat Tree at +1.2 %, true +1.9 %, and went into every combination).
        """
        done = Counter(r.attrs.get("design") for r in records if not r.stopped_with_driver)
        run = {r.config_key for r in records}

        def untried(name: str, value: Any) -> bool:
            """``base`` with ``name`` set to ``value`` is neither blamed nor already run: a move already run is no
            move, and the next param gets its turn (a threshold moved to a value already run hid the NCCL
            algorithm's swap behind it at every decision, rand-win-1018)."""
            moved = {**base, name: value}
            return blamed_by(blames, moved) is None \
                and design.config_of_settings(self.space, moved, kind="probe", profile="").config_key not in run

        params = {p.name for p in self.space.params}
        categorical = {n for n, v in base.items() if n in params and _categorical(self.space.param(n), v)}
        swaps = [(varied_param(label), design.settings_of_record(self.space, settings))
                 for label, settings in asked_settings("swap-one", records)]
        for name, value in base.items():
            if name in categorical:
                # a swap is asked once beside each value of the other categorical settings: the protocol swapped
                # beside Ring says nothing of it beside Tree (stress-cat-pair: Tree and Simple pay +7 % together)
                asked = sum(1 for swapped, settings in swaps if swapped == name
                            and all(settings.get(n) == base[n] for n in categorical - {name}))
                rival = self._rival(model, base, name, done, untried, asked)
                if rival is not None:
                    return name, *rival
                continue
            if done["move-one"] >= MAX_MOVES or categorical_only or name not in params or isinstance(value, bool) \
                    or not isinstance(value, (int, float)):
                continue
            points = {float(v): model.effect(name, v) for v in model.values.get(name, ()) if not isinstance(v, bool)}
            unset = design.deployed_number(self.deployed.get(name))
            if unset is not None:
                points.setdefault(unset, (0.0, 0.0))
            order = sorted(points)
            if float(value) not in points:
                continue
            i = order.index(float(value))
            here, se_here = points[float(value)]
            near = [order[j] for j in (i - 1, i + 1) if 0 <= j < len(order) and order[j] != unset]
            near = [u for u in near if points[u][0] > here - math.hypot(points[u][1], se_here)]
            if not near:
                # No neighbour as good (the deployed value is none: dropping the setting is the drop-one's
                # question): a value further off that the runs show clearly better, by more than one standard error
                # of the difference, is the line search's next stop. rand-recipe-1008: the recipe's overlap limit of
                # 2 sat beside a worse 3 and was never tried at 4, better by 0.8 ± 0.7 points.
                near = [u for u in order if u not in (float(value), unset)
                        and points[u][0] - here > math.hypot(points[u][1], se_here)]
            if not near:
                continue
            best = max(near, key=lambda u: points[u][0])
            target = next((v for v in model.values.get(name, ()) if float(v) == best), None)
            if target is not None and untried(name, target):
                return name, target, "move-one"
            step = self._toward_cliff(base, name, target, blames, order, untried) if target is not None else None
            if step is not None:
                return name, step, "move-one"
        return None

    def _toward_cliff(self, base: dict[str, Any], name: str, target: Any, blames: Sequence[Blame],
                      measured: Sequence[float], untried: Callable[[str, Any], bool]) -> Any:
        """A step of numeric param ``name`` from its value in ``base`` toward ``target``, a better value that fails
        beside the rest of ``base`` (each ran alone; together they run out of memory): the best value in that company
        lies before the nearest cliff the blames draw, so bisect, from the measured value nearest that cliff, past
        steps already run; ``None`` when no blame stops ``target`` there or no value is left between.

        stress-combo-oom: a +4 % threshold (2 GiB alone) and pipelining run out of memory together from 1 GiB; the
        study kept 512 MiB beside pipelining, 1.8 points below 1 GiB - 1 byte.
        """
        param, value, moved = self.space.param(name), float(base[name]), {**base, name: target}
        cliffs = [float(v) for b in blames if b.covers(name, target) or b.company and b.covers_all(moved)
                  for n, v, _ in b.members() if n == name]
        if not cliffs:
            return None
        edge = min(cliffs, key=lambda c: abs(c - value))
        lo, hi = sorted((value, edge))
        start = min((u for u in measured if lo < u < hi), key=lambda u: abs(u - edge), default=value)
        for _ in range(4):
            step = halfway(param, start, edge)
            if float(step) in (start, edge):
                return None
            if untried(name, step):
                return step
            start = float(step)
        return None

    def below_cliff(self, model: EffectsModel, base: dict[str, Any], blames: Sequence[Blame],
                    records: Sequence[RunRecord]) -> tuple[str, Any, str, Any] | None:
        """A value the model prefers to ``base``'s (a setting to add, or a better value of one it sets) that fails
        beside one of ``base``'s numeric settings (blamed in company), set with that setting moved short of the
        cliff: ``(name, value, moved, step)``, ``step`` halfway toward the cliff from the measured value nearest it on
        its safe side, as an engineer halves a threshold that ran out of memory beside a new flag; once such a step
        failed, from the largest value known to run beside ``name=value``. One of the study's ``MAX_MOVES``, tried
        where the model predicts half a sigma over ``base`` (the moved setting's effect read at the better of the step's
        ends, where the bisection that follows goes).
        The move-one then bisects on toward the cliff (:meth:`_toward_cliff`).

        stress-combo-oom: a 2 GiB threshold (+4 % alone) ran out of memory beside pipelining (+3 %) from 1 GiB, and
        the add-one left pipelining out: 15 of 19 misses kept 2 GiB without it, +5.5 % of a best +7.8 %.
        """
        done = Counter(r.attrs.get("design") for r in records if not r.stopped_with_driver)
        if done["move-one"] >= MAX_MOVES:
            return None
        run = {r.config_key for r in records}
        ran: list[tuple[RunRecord, dict[str, Any]]] = []  # each run's settings, read once a cliff applies
        for name, (value, effect, _) in sorted(model.best_values().items(), key=lambda kv: (-kv[1][1], kv[0])):
            grown = {**base, name: value}
            gain = effect - (model.effect(name, base[name])[0] if name in base else 0.0)
            if gain <= 0.0 or blamed_by(blames, {name: value}) is not None:
                continue
            for blame in (b for b in blames if b.company and b.covers_all(grown)):
                for moved, edge, direction in blame.members():
                    if moved == name or not direction or moved not in base or not design.is_number(base[moved]) \
                            or not design.is_number(edge):
                        continue
                    ran = ran or [(r, design.settings_of_record(self.space, r.attrs.get("settings") or {}))
                                  for r in records if r.config_key and not r.is_baseline and not r.stopped_with_driver]
                    deployed = design.deployed_number(self.deployed.get(moved))
                    beside = [(r, float(s.get(moved, math.nan if deployed is None else deployed))) for r, s in ran
                              if name in s and render_value(s[name]) == render_value(value)]
                    measured = {float(v): model.effect(moved, v)[0] for v in model.values.get(moved, ())
                                if design.is_number(v)}
                    if any(not r.ok and r.attrs.get("design") == "move-one" for r, _ in beside):
                        safe = [u for r, u in beside if r.ok]  # a step failed: bisect from what ran beside it
                    else:
                        safe = [*measured, *([] if deployed is None else [deployed])]
                    safe = [u for u in safe if (u - float(edge)) * direction < 0]
                    if not safe:
                        continue
                    start = max(safe, key=lambda u: u * direction)
                    step = halfway(self.space.param(moved), start, edge)
                    if float(step) in (start, float(edge)):
                        continue
                    moved_to = {**grown, moved: step}
                    key = design.config_of_settings(self.space, moved_to, kind="probe", profile="").config_key
                    if key in run or blamed_by(blames, moved_to) is not None:
                        continue
                    # what the move reaches: the better of its ends' effects, the start's (none for the deployed
                    # value) and the cliff's where it was measured, as the move-one bisects on toward the better one.
                    # Read halfway between them, a batch of 6 between 4 (+1.5 %) and 8 (+3.6 %) kept the minimal
                    # remat policy out where the policy at 7 was the best (stress-remat-batch-360019)
                    ends = [measured.get(start, 0.0), *([measured[float(edge)]] if float(edge) in measured else [])]
                    if gain + max(ends) - model.effect(moved, base[moved])[0] > self._sigma / 2.0:
                        return name, value, moved, step
        return None

    def _rival(self, model: EffectsModel, base: dict[str, Any], name: str, done: Counter,
               untried: Callable[[str, Any], bool], swapped: int) -> tuple[Any, str] | None:
        """A value of categorical ``name`` to swap into ``base``, not the deployed one, ``untried`` there (``done``:
        the study's runs by design; ``swapped``: the swap-one runs of ``name`` beside ``base``'s other categorical
        values), and its design: ``move-one`` for the best measured value within one standard error (of the
        difference) of ``base``'s, else ``swap-one`` for the best of the rest.

        A swap-one is tried while ``base``'s value is not sure to pay alone (``_sure``), ``MAX_SWAPS`` a param. A value
        can measure worse alone and pay in company, and no additive model predicts that: an NCCL algorithm that only
        helps with double buffering (rand-win-3021: NVLS, 0 alone, +10 % with it; Tree, +3 % alone, went into every
        combination, and the study ended 6 pp short of the best).
        """
        here, se_here = model.effect(name, base[name])
        param = self.space.param(name)
        close, rest = [], []
        wide = swapped < MAX_SWAPS and not self._sure(model, name, base[name])
        for value in model.values.get(name, ()):
            effect, se = model.effect(name, value)
            if value == base[name] or design.same_value(param, value, self.deployed.get(name)):
                continue
            if effect > here - math.hypot(se, se_here) and done["move-one"] < MAX_MOVES:
                close.append((effect, value, "move-one"))
            elif wide:
                # a close rival the spent line search left unrun is the swap's first choice, not a value worse alone
                # (ppmb-1007: Simple, +0.0 % measured, true +2.0 %, lost its turn to LL, -1.6 %)
                rest.append((effect, value, "swap-one"))
        for _, value, kind in sorted(close, key=lambda r: -r[0]) + sorted(rest, key=lambda r: -r[0]):
            if untried(name, value):
                return value, kind
        return None

    def context_swap(self, arms: Sequence[Arm], blames: Sequence[Blame],
                     records: Sequence[RunRecord]) -> tuple[dict[str, Any], str, str, Any, str] | None:
        """Before any winner or contender: the best measured configuration of several settings, worth ``null_gain``,
        with a categorical setting swapped (:meth:`neighbour`): ``(settings, label, name, value, design)``.

        A pair that only pays together, one of them worse alone, leaves the screen nothing near the win bar to look
        around (rand-win-2000: Ring -5.9 % alone, +9 % with pipelined p2p; the study ended `null`). No null verdict
        while this run is due (:meth:`~flagopt.decide._stop.Stopping.stop_verdict`).
        """
        multi = [a for a in self.eligible(arms) if a.estimate is not None and a.estimate.gain >= self.space.stop.null_gain
                 and len(design.settings_of_record(self.space, a.first.attrs.get("settings") or {})) >= 2]
        if self._model is None or not multi:
            return None
        arm = max(multi, key=lambda a: a.estimate.gain)
        settings = design.settings_of_record(self.space, arm.first.attrs.get("settings") or {})
        move = self.neighbour(self._model, settings, blames, records, categorical_only=True)
        return (settings, arm.label, *move) if move is not None else None

    def conflict_drops(self, arms: Sequence[Arm], asked: int) -> Iterator[tuple[dict[str, Any], str]]:
        """Before any winner: the drop-one variants of a combination of three or more settings that measured clearly
        below its best single part and below the sum of its parts (:func:`~flagopt.decide._design.clear_drop`):
        ``(settings, label)``, the largest shortfall first, its weakest part dropped first; ``asked``: conflict-drop
        runs so far.

        Two settings that hide the same communication cost spoil each other, and the combination that set both
        measured below either alone (rand-recipe-60004: pipelined all-gather +4.6 % and pipelined p2p +4.5 % alone,
        -2.8 % together with Ring). The model pools that run into both main effects; the balanced rows then set them
        together again, and no run ever set all-gather without p2p beside Tree (+7.8 %): the study ended on `budget`.
        A shortfall a negative part explains (a -15 % setting) is no conflict.

        Only the model's combination (every param's best value, each measured alone) is split. A balanced or pair row
        sets settings together to estimate their effects, and its drop-ones spoil the design (rand-recipe-60020: six
        drop-ones of a balanced row, and its +7.3 % best was never confirmed). An add-one or a recipe with a profile
        added that measured below its base is the model's to explain: its one useful drop-one is the base, already
        measured (rand-recipe-1021: six drop-ones of the recipe's flags, and the study won 1.4 points lower).
        """
        if asked >= MAX_CONFLICT_DROPS:
            return
        singles: dict[tuple[str, Any], float] = {}
        combos = []
        for arm in self.eligible(arms):
            settings = design.settings_of_record(self.space, arm.first.attrs.get("settings") or {})
            if len(settings) == 1:
                singles[next(iter(settings.items()))] = arm.estimate.gain
            elif len(settings) >= 3 and arm.first.attrs.get("design") == COMBINATION:
                combos.append((arm, settings))
        bar = design.clear_drop(self._sigma)
        conflicts = []
        for arm, settings in combos:
            parts = {n: singles[(n, v)] for n, v in settings.items() if (n, v) in singles}
            if not parts or arm.estimate.gain > min(max(parts.values()), sum(parts.values())) - bar:
                continue
            conflicts.append((max(parts.values()) - arm.estimate.gain, arm, settings, parts))
        for _, arm, settings, parts in sorted(conflicts, key=lambda c: (-c[0], c[1].label)):
            for name in sorted(parts, key=lambda n: (parts[n], n)):
                rest = {k: v for k, v in settings.items() if k != name}
                yield rest, DROPPED + name + ": " + ", ".join(design.setting_label(k, v) for k, v in rest.items())


def _categorical(param: Param, value: Any) -> bool:
    """Whether ``param`` is a categorical of named values (not a boolean, not numbers offered as choices)."""
    numbers = all(isinstance(c, (int, float)) and not isinstance(c, bool) for c in param.choices or ())
    return param.choices is not None and not isinstance(value, bool) and not numbers
