"""What the effects model proposes beyond single settings: the combination (a winner's companions in a balanced
design: _balanced.py), add-one variants around the best configuration, and whether one is worth a run (statistics.md
§9, §10); the move-one and swap-one variants are in _moves.py, a failed proposal is mended in _mend.py."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from flagopt.decide import _design as design
from flagopt.decide._arms import Arm
from flagopt.decide._balanced import BalancedDesigns
from flagopt.decide._blame import DETERMINISTIC, Blame, blamed_by
from flagopt.decide._model import EffectsModel
from flagopt.decide._moves import Moves
from flagopt.decide._plan import COMBINATION, MODEL_DESIGNS
from flagopt.decide._runs import RunRecord
from flagopt.space import Space

#: At most this many such configurations a study: each is a new arm to race, and past the first few the model is
#: re-proposing its own noise.
MAX_MODEL_PROPOSALS = 3
#: Around a confirmed winner, once no setting left has a pooled effect above zero: the settings within this many
#: standard errors of zero are still tried on top of it (optimism under uncertainty).
OPTIMISM_SE = 1.0


class Proposals(BalancedDesigns, Moves):
    """Part of :class:`~flagopt.decide.Planner` (through the screen): the configurations the model proposes."""

    space: Space
    deployed: dict[str, str | None]
    _sigma: float
    _model: EffectsModel | None
    blames: Callable[[Sequence[RunRecord]], list[Blame]]
    single_setting_arms: Callable[[Sequence[Arm]], dict[str, dict[Any, Arm]]]

    def combination(self, model: EffectsModel | None, blames: Sequence[Blame]) -> dict[str, Any]:
        """Every param's best value by its pooled effect, where that effect is above zero (and not blamed).

        Not only the values above half the minimum effect: where the best configuration adds several +0.5 to +2 %
        effects, that floor left most of them out (docs/statistics.md §9). The effects pool every run that set the
        value (probes, earlier combinations, their drop-one variants), so a combination that measured below its
        parts changes the next one.
        """
        return self.additions(model, {}, blames) if model is not None else {}

    def combination_due(self, model: EffectsModel | None, records: Sequence[RunRecord], blames: Sequence[Blame],
                        tried: set[str]) -> dict[str, Any]:
        """The combination (:meth:`combination`) if it is the screen's next run: two settings or more, not in
        ``tried``, not blamed, within ``MAX_MODEL_PROPOSALS`` and predicted above every earlier proposal; else ``{}``.
        The screen proposes it, and no null verdict is drawn while it is due."""
        combo = self.combination(model, blames)
        key = design.config_of_settings(self.space, combo, kind="probe", profile="").config_key
        if len(combo) >= 2 and key not in tried and blamed_by(blames, combo) is None \
                and self.proposals_left(records) and self.worth_running(model, combo, records):
            return combo
        return {}

    @staticmethod
    def combination_ran(records: Sequence[RunRecord]) -> bool:
        """Whether a combination has run and measured (the balanced screen follows the first)."""
        return any(r.attrs.get("design") == COMBINATION and r.ok for r in records)

    def additions(self, model: EffectsModel, base: dict[str, Any], blames: Sequence[Blame], *,
                  optimism: float = 0.0, own: bool = False) -> dict[str, Any]:
        """Params ``base`` does not set whose best value has a pooled effect above zero (above ``-optimism``
        standard errors: the settings the runs have not ruled out); ``own``: a catalog profile's own settings
        (``target:key``) too, as around a winner, whose companions' design includes them."""
        out: dict[str, Any] = {}
        names = {p.name for p in self.space.params}
        for name, (value, effect, se) in model.best_values().items():
            if (name in names or own and design.is_own_setting(name)) and name not in base and effect + optimism * se > 0.0 \
                    and blamed_by(blames, {name: value}) is None:
                out[name] = value
        return dict(sorted(self._apart(model, base, out, blames, optimism).items()))

    @staticmethod
    def _apart(model: EffectsModel, base: dict[str, Any], out: dict[str, Any], blames: Sequence[Blame],
               optimism: float) -> dict[str, Any]:
        """``out`` changed until no blame in company covers it with ``base``: for each such blame, one of the settings
        it adds takes its next best value that the blame does not cover (a smaller threshold beside the pipelining
        flag it ran out of memory with), or is left out, whichever keeps most of the pooled effects. A combination
        with every param's best value runs out of memory where two of them fail together (stress-combo-oom), and
        leaving one out loses its gain where a neighbouring value keeps most of it."""
        for _ in range(len(out)):
            blame = blamed_by(blames, {**base, **out})
            if blame is None or not blame.company:
                return out
            options = []
            for name in (n for n, _, _ in blame.members() if n in out):
                rest = {k: v for k, v in out.items() if k != name}
                options.append(rest)
                values = sorted(model.values.get(name, ()), key=lambda v: -model.effect(name, v)[0])
                for value in values:
                    effect, se = model.effect(name, value)
                    if effect + optimism * se > 0.0 and blamed_by(blames, {name: value}) is None \
                            and not blame.covers_all({**base, **rest, name: value}):
                        options.append({**rest, name: value})
                        break
            if not options:
                return out
            out = max(options, key=lambda o: sum(model.effect(n, v)[0] for n, v in o.items()))
        return out

    @staticmethod
    def _effect(model: EffectsModel | None, name: str, value: Any) -> float:
        return model.effect(name, value)[0] if model is not None else 0.0

    @staticmethod
    def proposals_left(records: Sequence[RunRecord], *, refining: bool = False) -> bool:
        """Whether the study may still run a configuration the model proposes (``MAX_MODEL_PROPOSALS``); ``refining``:
        around a confirmed winner, which has a budget of its own.

        The search's proposals do not count against the refinement's: three combinations spent before the winner
        was confirmed left it no add-one run (win10-1012: Tree with a threshold and an overlap limit, confirmed at
        +9.9 %, never ran with the pipelined all-gather, +0.5 % alone, and ended 1.4 pp short of the best).
        """
        proposed = {r.config_key: r for r in records if r.attrs.get("design") in MODEL_DESIGNS
                    and not r.stopped_with_driver and (not refining or r.attrs.get("phase") == "refine")}
        # A proposal that failed as its settings do together (blamed in company) is no arm to race: the next one
        # takes another value (stress-combo-oom: a threshold lowered beside the pipelining flag it ran out of
        # memory with, 4 GiB, then 2 and 1; the 512 MiB that runs was never proposed). Twice the cap in all.
        failed = sum(1 for r in proposed.values() if not r.ok and r.attrs.get("failure_class") in DETERMINISTIC)
        return len(proposed) - failed < MAX_MODEL_PROPOSALS and len(proposed) < 2 * MAX_MODEL_PROPOSALS

    def worth_running(self, model: EffectsModel | None, settings: dict[str, Any], records: Sequence[RunRecord]) -> bool:
        """Whether a configuration the model proposes is predicted to beat every earlier proposal by half a sigma.

        Without it, each run re-fitted the model and the next combination differed from the last in a setting
        that does not matter (a threshold of no effect at another value): three runs of the same true gain.
        """
        if model is None:
            return True
        earlier = [design.settings_of_record(self.space, r.attrs.get("settings") or {}) for r in records
                   if r.attrs.get("design") in MODEL_DESIGNS and r.ok]
        if not earlier:
            return True
        best = max(model.predict(e, own_runs=False).gain for e in earlier)
        return model.predict(settings, own_runs=False).gain > best + self._sigma / 2.0

    def promising_unrun(self, records: Sequence[RunRecord], arms: Sequence[Arm], bar: float) -> bool:
        """Whether the model's combination was never run and its parts could add up to ``bar``.

        No null verdict while it is: on rand-below two settings of +1.7 % each, measured once alone, were never run
        together. The parts are read from their own runs, each less one run-noise sigma (the pooled effects shrink
        single runs hard where most settings do nothing, and this question is whether one run is worth it).
        """
        if self._model is None:
            return False
        combo = self.combination(self._model, self.blames(records))
        if len(combo) < 2:
            return False
        key = design.config_of_settings(self.space, combo, kind="probe", profile="").config_key
        if any(r.config_key == key for r in records if not r.stopped_with_driver):
            return False
        # Only a combination the screen would still propose: past the proposal budget, or no better than an earlier
        # proposal, it never runs, and waiting for it kept 6 of 50 null studies from their verdict to the end.
        if not self.proposals_left(records) or not self.worth_running(self._model, combo, records):
            return False
        alone = self.single_setting_arms(arms)
        parts = sum(max(a.estimate.gain - self._sigma, 0.0) for n, v in combo.items()
                    if (a := alone.get(n, {}).get(v)) is not None and a.estimate is not None)
        return parts >= bar - self._sigma

    def _sure(self, model: EffectsModel, name: str, value: Any) -> bool:
        """A setting whose pooled effect is a winner's on its own, three standard errors clear (the microbatch count:
        +17 % ± 1 %). Two errors above zero was not enough: pp64's pipelined p2p (+1.5 % ± 0.7 % alone, a loss next to
        an overlap limit) lost its drop-one run, and the sign flip went unseen in 10 of 30 seeds."""
        effect, se = model.effect(name, value)
        return effect - 3.0 * se > self.space.stop.win

