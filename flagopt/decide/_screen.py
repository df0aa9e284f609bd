"""The screen: catalog profiles, one-factor probes, their refinement, the combination and its drop-one variants."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from flagopt.decide import _design as design
from flagopt.decide import _grid as grid
from flagopt.decide._arms import Arm
from flagopt.decide._balanced import COMPANIONS, companion_label, informs_only
from flagopt.decide._blame import Blame, blame_failures, blamed_by, excluded_by
from flagopt.decide._model import EffectsModel, effects_model
from flagopt.decide._mend import mend_failed
from flagopt.decide._moves import CONFLICT_DROP
from flagopt.decide._pairs import PAIRS, PAIRS_UNMASKED, RECIPE_PAIRS, PairRows, recipe_pair_row
from flagopt.decide._plan import (COMBINATION, DROPPED, MODEL_DESIGNS, Plan, asked_settings, dropped_before,
                                  settings_set, variant_label)
from flagopt.decide._profiles import (PROFILE_ADD_ONE, PROFILE_DROP, PROFILE_REST, PROFILE_UNION, better_values,
                                      profile_add_one, profile_bases, profile_drop_one, profile_union,
                                      profile_without_failures, profile_without_harm)
from flagopt.decide._proposals import OPTIMISM_SE, Proposals
from flagopt.decide._runs import CANCELLED, RunRecord
from flagopt.space import Space, TrialConfig


class Screen(Proposals, PairRows):
    """Part of :class:`~flagopt.decide.Planner`: the next configuration of the screen."""

    space: Space
    deployed: dict[str, str | None]
    max_trials: int
    _sigma: float
    _model: EffectsModel | None

    def blames(self, records: Sequence[RunRecord]) -> list[Blame]:
        return blame_failures(self.space, records, self.deployed)

    def next_screen(self, records: Sequence[RunRecord], arms: Sequence[Arm], in_flight: Sequence[Plan],
                    leader: Arm | None, *, ahead: bool = False,
                    endgame: bool = False) -> tuple[TrialConfig, str, str] | None:
        """The next configuration of the screen: ``(config, reason, design)``, or ``None`` when it is done.

        ``ahead``: a slot would otherwise idle until the runs in flight are in, so go one stage ahead of them: the
        combination of what helped so far while probes are still out, and the drop-one variants of a combination
        that is still running (speculative runs: they cost budget, not wall time).
        ``endgame``: the budget's last runs (:meth:`~flagopt.decide.Planner.next`): no more one-factor probes or
        refinements between grid points, only what the model makes of them (the combination first).
        """
        space = self.space
        # A job someone cancelled was tried (they did not want it run); one cancelled with the driver was not.
        tried = {r.config_key for r in records if not r.stopped_with_driver} | {p.config.config_key for p in in_flight}
        attempted = {r.profile for r in records if r.kind == "profile" and not r.stopped_with_driver} \
            | {p.config.profile for p in in_flight}
        for profile in space.profiles:
            if profile.profile not in attempted:
                return profile, "catalog profile", "profile"
        blames = self.blames(records)

        def fresh(settings: dict[str, Any], label: str, kind: str = "probe") -> TrialConfig | None:
            config = design.config_of_settings(space, settings, kind=kind, profile=label)
            if not settings or config.config_key in tried or blamed_by(blames, settings) is not None:
                return None
            return config

        if (rest := profile_without_failures(space, records, blames, tried)) and (config := fresh(*rest)) is not None:
            return config, "a catalog profile without the settings that fail", PROFILE_REST
        if (rest := profile_without_harm(space, records, self._model, tried)) and (config := fresh(*rest)) is not None:
            return config, "a catalog profile without the settings that cost most alone", PROFILE_REST
        by_param = self.single_setting_arms(arms)
        if not space.screen:
            return None
        for param, value in () if endgame else grid.probe_order(space.params, self.deployed, self.max_trials):
            config = fresh({param.name: value}, design.probe_label(param, value))
            if config is not None:
                return config, f"one-factor probe of {param.name}", "probe"
        pending = any(p.kind in ("probe", "profile") for p in in_flight)
        failed_grid: dict[str, list[Any]] = {}
        for rec in records:
            if rec.attrs.get("design") == "probe" and not rec.ok and rec.status not in (CANCELLED, "running"):
                settings = design.settings_of_record(space, rec.attrs.get("settings") or {})
                if len(settings) == 1:
                    (name, value), = settings.items()
                    failed_grid.setdefault(name, []).append(value)
        # refinement looks between the grid points only (never refines a refinement)
        measured = {name: {v: 0.0 if a.same_program else a.estimate.gain for v, a in values.items()
                           if a.estimate is not None and a.first.attrs.get("design") == "probe"}
                    for name, values in by_param.items()}
        stands_out = max(self._sigma, space.noise.min_effect / 2.0)
        for param, value in () if endgame else grid.refinements(space.params, measured, failed_grid, self.deployed,
                                                                stands_out=stands_out,
                                                                clearly_below=design.clear_drop(self._sigma)):
            config = fresh({param.name: value}, design.probe_label(param, value))
            if config is not None:
                return config, f"refining {param.name} around its best screened value", "refine"
        if pending and not ahead:
            return None  # the combination waits for every probe's result
        model = self._model
        # After the probes: what they measure alone lets the rules above explain a profile's cost first.
        if (rest := profile_drop_one(space, records, arms, self._sigma, tried)) and (config := fresh(*rest)) is not None:
            return config, "a catalog profile far below the deployed job, without one of its settings", PROFILE_DROP
        mended = mend_failed(space, records, in_flight, blames, model)
        if mended is not None:
            return mended
        proposals_in_flight = [p for p in in_flight if p.attrs.get("design") in MODEL_DESIGNS]
        budget_left = self.proposals_left(records, refining=leader is not None)
        combo = self.combination_due(model, records, blames, tried) if not proposals_in_flight else {}
        if combo:
            config = fresh(combo, "combination: " + ", ".join(
                design.probe_label(space.param(n), v) for n, v in combo.items()))
            if config is not None:
                return config, "the best value of every param whose pooled effect is above zero", COMBINATION
        profiles_due = model is not None and not proposals_in_flight
        start = profile_add_one(space, arms, lambda base: self.additions(model, base, blames),
                                lambda base: better_values(model, base, self.deployed, blames), fresh,
                                asked_settings(PROFILE_ADD_ONE, records, in_flight)) if profiles_due else None
        if start is not None:
            return start, "what the model says could still be added to a catalog profile", PROFILE_ADD_ONE
        union = profile_union(space, arms, fresh, asked_settings(PROFILE_UNION, records, in_flight)) \
            if profiles_due else None
        if union is not None:
            return union, "the best measured recipe with another catalog profile", PROFILE_UNION
        # Rows on the recipe while nothing is near the win bar: a recipe that measured near it is a contender, and
        # rows around it only made its race longer (rand-recipe-12: a row read high by noise and led for ten runs)
        bases = profile_bases(space, arms) if profiles_due and leader is None else []
        left_out = excluded_by(blames)
        if bases and not self.near_the_bar(arms) \
                and (beside := recipe_pair_row(space, self.deployed, *bases[0], records,
                                               [s for _, s in asked_settings(RECIPE_PAIRS, records, in_flight)],
                                               lambda n, v: left_out(n, v) or self.costs_the_bar(n, v))) \
                and (config := fresh(*beside)) is not None:
            return config, "values no run set beside the best recipe's own flags", RECIPE_PAIRS
        if leader is None and not proposals_in_flight:
            for rest, label in self.conflict_drops(arms, len(asked_settings(CONFLICT_DROP, records, in_flight))):
                if (config := fresh(rest, label)) is not None:
                    return config, "which setting spoils a combination that measured below its best part?", \
                        CONFLICT_DROP
        if leader is None and (ahead or not proposals_in_flight):
            # ahead of a combination still running (several slots): its rows need not wait for it
            row = self.balanced_row(records, arms, blames, tried, ahead=ahead and bool(proposals_in_flight))
            if row is not None:
                return row
        if leader is not None and model is not None:
            # The winner's small companions (+0.3-0.8 % each, under one run's noise) in a balanced design on top of
            # it: every run informs every companion, where one add-one run per setting told them apart no better
            # than its probe did (sixth-session note).
            rows = self.companion_rows(model, leader, blames, records)
            base = design.settings_of_record(space, leader.first.attrs.get("settings") or {}) if rows else {}
            for i, (extra, size) in enumerate(rows):
                config = fresh({**base, **extra}, companion_label(leader.label, i, size, ", ".join(
                    design.setting_label(n, v) for n, v in extra.items())))
                if config is not None:
                    return config, f"a balanced design of the companions of {leader.label}", COMPANIONS
        anchor = leader or self.contender(arms)
        settings, anchor_label = {}, ""
        if anchor is not None:
            settings = design.settings_of_record(space, anchor.first.attrs.get("settings") or {})
            anchor_label = anchor.label
        elif ahead and proposals_in_flight:
            # A combination still running is a contender only if its settings' gains alone add up to one (flag
            # effects are mostly separable), each less one run-noise sigma: it took the best screened value of every
            # param, high by selection. Otherwise its drop-one variants are runs for nothing (on the null landscape
            # they made every re-proposed combination cost three or four more runs).
            settings = design.settings_of_record(space, proposals_in_flight[0].config.settings())
            predicted = sum(max(self._effect(model, n, v) - self._sigma, 0.0) for n, v in settings.items())
            if predicted < space.stop.win - self._sigma:
                settings = {}
            anchor_label = proposals_in_flight[0].config.profile
        best = anchor or self.best_measured(arms)
        if best is not None and not proposals_in_flight and budget_left and model is not None:
            # Add-one: what the model says could still be added to the best configuration (a winner confirmed early,
            # e.g. the microbatch count, never ran with the other settings that measured positive alone).
            base = design.settings_of_record(space, best.first.attrs.get("settings") or {})
            extra = self.additions(model, base, blames, own=leader is not None)
            if not extra and leader is not None:
                # Nothing left above zero: what one standard error of optimism still adds. The probes between two
                # controls share their error, and one control 2 % high put four +1.2 to +2 % settings below zero
                # (ppmb-1003: the winner never ran with them, 3.8 points short of the best).
                extra = self.additions(model, base, blames, optimism=OPTIMISM_SE, own=True)
            gain = sum(self._effect(model, n, v) for n, v in extra.items())
            # Around a confirmed winner any setting not ruled out is worth one run: the refinement budget bounds it,
            # and a winner's small companions (+0.3-0.8 % each, below one run's noise) are what within 1 % of the
            # best takes (pair, win10: the winner alone ended 1-1.5 pp short in a third of the seeds).
            if extra and (gain > self._sigma / 2.0 and self.worth_running(model, {**base, **extra}, records)
                          or leader is not None):
                config = fresh({**base, **extra}, f"{best.label} + " + ", ".join(
                    design.setting_label(n, v) for n, v in extra.items()))
                if config is not None:
                    return config, f"what the model predicts could still be added to {best.label}", "add-one"
            if (cliff := self.below_cliff(model, base, blames, records)) is not None:
                name, value, moved, step = cliff
                config = fresh({**base, name: value, moved: step}, variant_label(
                    f"{best.label} + {design.setting_label(name, value)}", space.param(moved), step))
                if config is not None:
                    return config, f"can {name} join {best.label} with {moved} short of the cliff they fail at?", \
                        "move-one"
        around = None
        if (leader is not None or settings) and model is not None:
            # Around the winner, and already around a contender (a combination near the win bar): its values came
            # from single probes, and a neighbour or rival worth more is best found before the race confirms it.
            move = self.neighbour(model, settings, blames, records)
            if move is not None:
                around = (settings, anchor_label, *move, "neighbouring" if move[2] == "move-one" else "other")
        elif leader is None and not proposals_in_flight:
            # Nothing near the win bar to look around: the best combination's categorical setting swapped once, for a
            # value that may pay only in its company
            swap = self.context_swap(arms, blames, records)
            around = (*swap, "other") if swap is not None else None
        if around is not None:
            base, base_label, name, value, kind, which = around
            config = fresh({**base, name: value}, variant_label(base_label, space.param(name), value))
            if config is not None:
                return config, f"is {name}'s {which} value better in {base_label}?", kind
        if settings and len(settings) >= 2:
            # The smallest patch that keeps the gain, and the check for a setting that helps alone but hurts
            # in company (a sign flip): does each setting of the best combination still matter?
            # Ties by name: a recipe's own settings, always set together, have the same effect up to rounding, and
            # the last digits must not choose the order (the same study on two stores ran them in two orders).
            order = sorted(settings, key=lambda n: (round(self._effect(model, n, settings[n]), 9), n))
            # Before a winner, each setting's question is asked once: the next combination differs from the last in a
            # setting or two, and its drop-one variants re-measured what the model already pooled (h200x2-1001: 19
            # runs of drop-ones around three combinations, and the +5.9 % best never got the runs a verdict needs).
            asked = dropped_before(records, in_flight) if leader is None else set()
            for name in order:
                if model is not None and self._sure(model, name, settings[name]):
                    continue  # the model is sure it pays (the microbatch count): dropping it would only confirm that
                if name in asked:
                    continue
                rest = {k: v for k, v in settings.items() if k != name}
                label = DROPPED + name + ": " + ", ".join(f"{k}={v}" for k, v in rest.items())
                config = fresh(rest, label)
                if config is not None:
                    return config, f"does {name} matter in {anchor_label}?", "drop-one"
        if leader is not None and not proposals_in_flight and not endgame:
            for rest, label in self.unmasked(arms, leader):
                if (config := fresh(rest, label)) is not None:
                    return config, "a pair row far below the winner, without the values that cost alone", PAIRS_UNMASKED
        if (anchor is None or leader is not None) and not proposals_in_flight and not endgame \
                and (row := self.pair_row_due(records, arms, in_flight, blames, around=leader)) is not None:
            return row, "pairs of settings no run has set together", PAIRS
        return None

    @staticmethod
    def screen_in_flight(in_flight: Sequence[Plan]) -> bool:
        """Whether runs of the screen (profiles, probes, refinements, combinations, drop-ones) are still in flight."""
        return any(p.kind == "profile" or p.attrs.get("design") for p in in_flight)

    def contender(self, arms: Sequence[Arm], *, room: float | None = None) -> Arm | None:
        """Before any winner is confirmed: the best arm of several settings that could still become one.

        One whose mean of ``n`` runs is within ``sigma / sqrt(n)`` of the win bar: a real effect of the bar's size
        measures at least that high five times out of six (the rule :meth:`null_race_floor` applies below
        ``noise.min_runs``, here on the win bar and at every run count). On one run that is the bar less a sigma;
        on several, a mean that settled below the bar no longer holds back the balanced screen (rand-win-12017: a
        +4.4 % combination stayed a contender over eight runs, the study ended on `budget`, and no run set the two
        settings that pay +4.7 % together; with the screen's rows it won at +9.4 % of a best +9.6 %).
        With ``room`` (the budget's runs before its last): only one whose race is not long there, the contender that
        holds back the balanced and pair rows; one :meth:`far_from_confirmed` lets them run first.
        """
        win = self.space.stop.win
        multi = [a for a in self.eligible(arms) if len(settings_set(a)) >= 2
                 and a.estimate.gain >= self.within_reach(win, a.n) and not informs_only(a, win)
                 and not (room is not None and self.far_from_confirmed(a, room))]
        return max(multi, key=lambda a: a.estimate.gain) if multi else None

    def single_setting_arms(self, arms: Sequence[Arm]) -> dict[str, dict[Any, Arm]]:
        """Arms that change exactly one param, by param and value (what the one-factor screen measured)."""
        out: dict[str, dict[Any, Arm]] = {}
        names = {p.name for p in self.space.params}
        for arm in arms:
            settings = design.settings_of_record(self.space, arm.first.attrs.get("settings") or {})
            if len(settings) == 1:
                (name, value), = settings.items()
                if name in names:
                    out.setdefault(name, {})[value] = arm
        return out

    def model(self, records: Sequence[RunRecord]) -> EffectsModel | None:
        return effects_model(self.space, records, self.deployed, sigma=self._sigma, direction=self.space.metric.direction)

    def best_measured(self, arms: Sequence[Arm]) -> Arm | None:
        """The arm with the best estimate above zero, if any."""
        scored = [a for a in arms if a.estimate is not None and a.estimate.gain > 0 and not a.same_program
                  and (self.space.numerics.allow or not a.numerics_flagged)]
        return max(scored, key=lambda a: a.estimate.gain) if scored else None
