"""The screen: catalog profiles, one-factor probes, their refinement, the combination and its drop-one variants."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from flagopt.decide import _design as design
from flagopt.decide._arms import Arm
from flagopt.decide._blame import Blame, blame_failures, blamed_by
from flagopt.decide._plan import Plan, settings_set
from flagopt.decide._runs import CANCELLED, RunRecord
from flagopt.space import Space, TrialConfig


class Screen:
    """Part of :class:`~flagopt.decide.Planner`: the next configuration of the screen."""

    space: Space
    deployed: dict[str, str | None]
    _sigma: float

    def blames(self, records: Sequence[RunRecord]) -> list[Blame]:
        return blame_failures(self.space, records, self.deployed)

    def next_screen(self, records: Sequence[RunRecord], arms: Sequence[Arm], in_flight: Sequence[Plan],
                    leader: Arm | None, *, ahead: bool = False) -> tuple[TrialConfig, str, str] | None:
        """The next configuration of the screen: ``(config, reason, design)``, or ``None`` when it is done.

        ``ahead``: a slot would otherwise idle until the runs in flight are in, so go one stage ahead of them: the
        combination of what helped so far while probes are still out, and the drop-one variants of a combination
        that is still running (speculative runs: they cost budget, not wall time).
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

        by_param = self.single_setting_arms(arms)
        if not space.screen:
            return None
        for param in space.params:
            for value in design.probe_values(param, self.deployed.get(param.name)):
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
        for param in space.params:
            # refinement looks between the grid points only (never refines a refinement), and only where the best
            # grid point stands out of the noise
            measured = {v: a.estimate.gain for v, a in by_param.get(param.name, {}).items()
                        if a.estimate is not None and a.first.attrs.get("design") == "probe"}
            if not measured or max(measured.values()) < max(self._sigma, space.noise.min_effect / 2.0):
                continue
            # a grid point that failed (an OOM cliff) is a neighbour too: the optimum often sits right below it
            measured.update({v: -math.inf for v in failed_grid.get(param.name, ()) if v not in measured})
            if self.deployed.get(param.name) is not None and param.choices is None:
                try:
                    measured[float(self.deployed[param.name])] = 0.0  # type: ignore[arg-type]
                except ValueError:
                    pass
            for value in design.refine_values(param, measured, self.deployed.get(param.name)):
                config = fresh({param.name: value}, design.probe_label(param, value))
                if config is not None:
                    return config, f"refining {param.name} around its best screened value", "refine"
        if pending and not ahead:
            return None  # the combination waits for every probe's result
        combos_in_flight = [p for p in in_flight if p.attrs.get("design") == "combination"]
        combo = self.combination(by_param)
        if len(combo) >= 2 and not combos_in_flight:
            config = fresh(combo, "combination: " + ", ".join(
                design.probe_label(space.param(n), v) for n, v in combo.items()))
            if config is not None:
                return config, "the best value of every param that helped alone", "combination"
        anchor = leader or self.contender(arms)
        settings, anchor_label = {}, ""
        if anchor is not None:
            settings = design.settings_of_record(space, anchor.first.attrs.get("settings") or {})
            anchor_label = anchor.label
        elif ahead and combos_in_flight:
            # A combination still running is a contender only if its settings' gains alone add up to one (flag
            # effects are mostly separable), each less one run-noise sigma: it took the best screened value of every
            # param, high by selection. Otherwise its drop-one variants are runs for nothing (on the null landscape
            # they made every re-proposed combination cost three or four more runs).
            settings = design.settings_of_record(space, combos_in_flight[0].config.settings())
            predicted = sum(max(self._alone_gain(by_param, n, v) - self._sigma, 0.0) for n, v in settings.items())
            if predicted < space.stop.win - self._sigma:
                settings = {}
            anchor_label = combos_in_flight[0].config.profile
        if settings:
            if len(settings) >= 2:
                # The smallest patch that keeps the gain, and the check for a setting that helps alone but hurts
                # in company (a sign flip): does each setting of the best combination still matter?
                order = sorted(settings, key=lambda n: self._alone_gain(by_param, n, settings[n]))
                for name in order:
                    rest = {k: v for k, v in settings.items() if k != name}
                    label = "without " + name + ": " + ", ".join(f"{k}={v}" for k, v in rest.items())
                    config = fresh(rest, label)
                    if config is not None:
                        return config, f"does {name} matter in {anchor_label}?", "drop-one"
        return None

    @staticmethod
    def screen_in_flight(in_flight: Sequence[Plan]) -> bool:
        """Whether runs of the screen (profiles, probes, refinements, combinations, drop-ones) are still in flight."""
        return any(p.kind == "profile" or p.attrs.get("design") for p in in_flight)

    def contender(self, arms: Sequence[Arm]) -> Arm | None:
        """Before any winner is confirmed: the best arm of several settings that could still become one."""
        floor = self.space.stop.win - self._sigma
        multi = [a for a in self.eligible(arms) if len(settings_set(a)) >= 2 and a.estimate.gain >= floor]
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

    def combination(self, by_param: dict[str, dict[Any, Arm]]) -> dict[str, Any]:
        """Every param's best screened value, where it measured above zero alone (and was not "worse").

        Not only the values above half the minimum effect: where the best configuration adds several +0.5 to +2 %
        effects, that floor left most of them out and nothing later puts them back (the refinement only drops
        settings, keeping the smaller patch within ``min_effect / 2``). below5's pick went from 37 % to 70 % of seeds
        within 1 % of the true best (docs/statistics.md §9).
        """
        out: dict[str, Any] = {}
        for name, values in by_param.items():
            scored = [(a.estimate.gain, v) for v, a in values.items() if a.estimate is not None and a.verdict != "worse"]
            if scored:
                gain, value = max(scored, key=lambda item: item[0])
                if gain > 0.0:
                    out[name] = value
        return dict(sorted(out.items()))

    @staticmethod
    def _alone_gain(by_param: dict[str, dict[Any, Arm]], name: str, value: Any) -> float:
        arm = by_param.get(name, {}).get(value)
        return arm.estimate.gain if arm is not None and arm.estimate is not None else 0.0
