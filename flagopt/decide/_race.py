"""The race: which arms a run could still change the decision about, which to re-run next, and when a control is due."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

from flagopt import stats
from flagopt.decide._arms import Arm
from flagopt.decide._balanced import informs_only
from flagopt.decide._controls import Controls
from flagopt.decide._design import settings_of_record
from flagopt.decide._model import EffectsModel
from flagopt.decide._plan import Plan, settings_set
from flagopt.decide._room import Room
from flagopt.space import Space, TrialConfig

#: A row of the balanced screen is raced once its mean clears ``stop.null_gain`` by this many run-noise sigmas
#: (:meth:`Race.clear_of_null`).
ROW_SIGMAS = 3.0


class Race(Room, Controls):
    """Part of :class:`~flagopt.decide.Planner`: winners, the leader, the candidates for a repeat."""

    space: Space
    slot_count: int
    max_trials: int
    _sigma: float
    _direction: str
    _model: EffectsModel | None

    def eligible(self, arms: Sequence[Arm]) -> list[Arm]:
        """Arms that could be recommended: measured, numerics accepted, not the deployed job's own program."""
        return [a for a in arms if a.estimate is not None and (self.space.numerics.allow or not a.numerics_flagged)
                and not a.same_program]

    def past_null(self, arms: Sequence[Arm]) -> list[Arm]:
        """Eligible arms confirmed better than the deployed job by ``stop.null_gain``: with one, no `null` verdict."""
        bar = self.space.stop.null_gain
        return [a for a in self.eligible(arms) if a.verdict == "better" and a.estimate.gain >= bar]

    def winners(self, arms: Sequence[Arm]) -> list[Arm]:
        """Arms whose fresh runs (all but the selecting first) clear ``stop.win`` at the family-wise confidence."""
        eligible = self.eligible(arms)
        # Several arms can reach the bar: the stop needs a family-wise confidence, Bonferroni over the re-run arms
        # whose interval reaches the win bar (an arm raced only against the null bar, its upper bound below the
        # win bar, cannot clear it by chance and would only make the test blunter).
        raced = sum(1 for a in eligible if a.n > 1 and a.estimate.hi >= self.space.stop.win)
        conf = stats.win_confidence(self.space.noise.confidence, raced)
        need = self.space.noise.min_runs - 1
        return [a for a in eligible if a.claim is not None and a.claim.n >= need and a.verdict == "better"
                and a.claim.bounds(conf)[0] >= self.space.stop.win]

    def leader(self, arms: Sequence[Arm]) -> Arm | None:
        """The best confirmed winner so far (the arm the refinement races against), or ``None``."""
        winners = self.winners(arms)
        if not winners:
            return None
        # A winner settled after its choice stays the choice while its own fresh runs still confirm it: the model
        # re-ranking it on the runs that settled it would hand the lead to a rival as high by selection as it was
        settled = [a for a in winners if a.settled is not None]
        if settled:
            return max(settled, key=lambda a: max(r.number for r in a.runs))
        # Among confirmed winners the model decides (its prediction pools every run that set each setting); the
        # claim stays the chosen arm's fresh runs. The best all-run mean of several winners is high by selection.
        score = {a.config_key: self.predicted(a) for a in winners}
        best = max(winners, key=lambda a: score[a.config_key])
        # The smallest patch that keeps the gain: a confirmed subset of the best predicted at least as good. No slack
        # below it: the model already shrinks a setting measured in few runs toward zero, and a quarter of the
        # minimum effect on top of that dropped a +1.1 % setting (rand-win-1020; on estimates, half of the minimum
        # effect let win10 settle on its +10 % setting alone in 20 of 30 seeds).
        settings = settings_set(best)
        smaller = [a for a in winners if settings_set(a) < settings and score[a.config_key] >= score[best.config_key]]
        return min(smaller, key=lambda a: (len(settings_set(a)), -score[a.config_key])) if smaller else best

    def best_confirmed(self, arms: Sequence[Arm]) -> Arm | None:
        """Before a winner: the best arm confirmed better than the deployed job on its fresh runs, if any."""
        better = [a for a in self.eligible(arms) if a.verdict == "better" and a.claim is not None and a.claim.lo > 0]
        return max(better, key=lambda a: a.estimate.gain) if better else None

    @staticmethod
    def spread(candidates: Sequence[Arm], in_flight: Sequence[Plan], slot: str, slots: Sequence[str]) -> list[Arm]:
        """The candidates ``slot`` should re-run: not those measured only on it while another slot is live.

        A winner must not be a property of one node group: its confirmation goes to another slot, which asks in
        its turn (meanwhile this slot runs the screen or the sampler).
        """
        if len(slots) < 2:
            return list(candidates)
        out = []
        for arm in candidates:
            where = {r.slot for r in arm.runs} | {p.slot for p in in_flight if p.repeat_of == arm.first.number}
            if where != {slot}:
                out.append(arm)
        return out

    def clear_of_null(self, arm: Arm) -> bool:
        """Whether ``arm`` reads above ``stop.null_gain`` by ``ROW_SIGMAS`` run-noise sigmas of its mean: a row of the
        balanced screen that high is raced like any configuration.

        The rows inform the effects, and the model's next combination carries what they found; but a pair that pays
        only together is not in an additive model's combination (rand-below-9010: NVLS and double buffering, each
        -0.1 % alone, +3 % together; the two rows that set both read +4.0 and +4.1 % at 0.5 % run noise, were never
        run again, and the study ended `null` on a +4 % job). A lucky row on the null landscape (+4 % at 1 % noise)
        stays below this bar. Measured in docs/benchmark-decisions.md (fiftieth-session note).
        """
        est = arm.estimate
        return est is not None and est.gain - ROW_SIGMAS * self._sigma / math.sqrt(arm.n) >= self.space.stop.null_gain

    def candidates(self, arms: Sequence[Arm], in_flight: Sequence[Plan], *, slot: str | None = None,
                   closing: bool = False) -> list[Arm]:
        """Arms whose next run could change the decision: racing against the stop thresholds, or the leader.

        Without a winner the targets are ``stop.null_gain`` and ``stop.win``; once one is confirmed, the leader's
        gain (the refinement only re-runs what could still beat it). An arm counts while its interval straddles a
        target it could reach (:func:`flagopt.stats.next_to_sample`), or while it reached one on too few runs.
        """
        noise = self.space.noise
        leader = self.leader(arms)
        target = self._targets(leader)
        # An arm in flight is not re-run on the same slot. With several slots a would-be winner may run on two at
        # once (its confirmation is what the study waits for); any other arm once, so the other slots explore.
        here = {p.repeat_of for p in in_flight if slot is None or p.slot == slot}
        count: dict[int | None, int] = {}
        for p in in_flight:
            count[p.repeat_of] = count.get(p.repeat_of, 0) + 1
        confirmed = {a.config_key for a in self.winners(arms)}
        top = self.best_confirmed(arms) if leader is None else None
        # Against the winner a one-run rival counts by the model's difference from it, on the winner's measured level:
        # a large effect they share is shrunk in every prediction alike (win10-14015: NCCL_ALGO=Tree won at +11.2 % on
        # three runs, predicted +9.0 %; its companions' single runs, predicted +8.8 to +9.3 %, never ran again, and
        # the study ended on Tree alone, true +10.0 % of a best +11.4 %). Over seven fresh seed sets, win10 within
        # 1 %: 168 -> 175 of 210 (docs/benchmark-decisions.md).
        shrunk = leader.estimate.gain - self.predicted(leader) if leader is not None else 0.0
        out = []
        for arm in arms:
            est = arm.estimate
            if est is None or arm.first.number in here or arm.n >= noise.max_repeats or arm is leader:
                continue
            flying = count.get(arm.first.number, 0)
            rising = est.gain >= self.space.stop.win - self._sigma
            if flying and not closing and flying >= (2 if rising else 1):
                continue
            if flying and not self.open_after(est, flying, target, against_null=leader is None):
                continue  # the runs in flight are expected to settle it: another would be wasted
            if arm.numerics_flagged and not self.space.numerics.allow or arm.same_program:
                continue  # a run more could not make it a recommendation
            if informs_only(arm, self.space.stop.win) and not self.clear_of_null(arm):
                continue  # a row of the balanced screen informs the effects; the model's next combination carries it
            if top is not None and arm is not top and arm.n < noise.min_runs \
                    and est.gain >= self.within_reach(top.estimate.gain, arm.n):
                # Racing for the best, not only against the bars: a configuration measured above the best confirmed
                # one is re-run before the study recommends a worse one (on 2xH100 the study ended on overlap2 at
                # +2.3 % with the JAX-Toolbox recipe measured once at +3.4 %, worth +3.5 % in an A/B).
                out.append(arm)
                continue
            if leader is None and arm.n >= 2 and est.gain < self.null_race_floor(arm.n):
                continue  # out of the race against stop.null_gain (and so against stop.win)
            if arm.n == 1:
                # One run is promising when its predicted gain lands within one run-noise sigma of a target: a real
                # effect of that size measures at least that high five times out of six. The prediction pools every
                # run: a combination whose single run came out low (drift, noise) is predicted from its parts too
                # (ppmb: the microbatch count alone won while the combination with four more gains, measured once
                # 0.4 pp below it, was never run again), and where nothing matters the effects shrink to zero, so a
                # lucky single run on the null landscape is not re-run for nothing.
                gain = self.predicted(arm) + shrunk
                if len(settings_set(arm)) >= 2 and arm.first.kind != "sampled":
                    # a combination or a profile: its own run counts as much as its parts' effects. A sampled point
                    # is one of many the sampler draws: its run counts through the model's departure for it, which
                    # shrinks to zero where configurations behave as their parts (on the null landscape a lucky
                    # sampled run was re-run in 9 of 50 studies that then ran out of budget before a null verdict).
                    gain = max(gain, est.gain)
                if gain >= min(target) - self._sigma:
                    out.append(arm)
                continue
            if stats.next_to_sample({arm.config_key: est}, target=target, min_runs=noise.min_runs,
                                    max_runs=noise.max_repeats) is not None:
                out.append(arm)
            elif leader is None and est.gain >= self.space.stop.win and arm.config_key not in confirmed:
                out.append(arm)  # above the bar on every run, not yet on the fresh ones at the family-wise level
        return out

    def null_doubt(self, arm: Arm) -> bool:
        """Whether the model puts ``arm`` at ``stop.null_gain`` or above, one standard error clear of half of it: a
        null verdict (nothing worth the bar) waits for another run of it (:meth:`~flagopt.decide._stop.Stopping
        .stop_verdict`).

        The race leaves such arms out: a row of the balanced screen informs the effects unless it reads far above
        the bar, and a single run is predicted from its parts. On a job whose best is made of settings of about +1 %
        each, the model pooling every run can still put one above the bar (stress-below-three-200010 ended `null`
        on a row predicted +2.6 % +- 0.5 % that never ran again).
        """
        prediction = self.prediction(arm)
        bar = self.space.stop.null_gain
        return prediction is not None and prediction.gain >= bar and prediction.gain - prediction.se >= bar / 2.0

    def open_after(self, est: stats.ArmEstimate, extra: int, target: tuple[float, ...], *,
                   against_null: bool = False) -> bool:
        """Whether an arm would still need runs after ``extra`` more at the same mean (its interval narrowed).

        Runs in flight are information on the way: with several slots, re-running an arm on every free slot at once
        would spend runs its first extra results already make unnecessary. ``against_null``: no winner yet, so an
        arm whose mean would sit below :meth:`null_race_floor` after them is out of the race (four repeats at once of
        a +1.5 % first run, which one run more usually rules out, made 4-slot null studies run out of budget).
        """
        noise = self.space.noise
        if against_null and est.gain < self.null_race_floor(est.n + extra):
            return False
        if est.n + extra < noise.min_runs:
            return True
        shrink = math.sqrt(est.n / (est.n + extra))
        projected = replace(est, n=est.n + extra, lo=est.gain - (est.gain - est.lo) * shrink,
                            hi=est.gain + (est.hi - est.gain) * shrink, se=est.se * shrink)
        return stats.next_to_sample({"arm": projected}, target=target, min_runs=noise.min_runs,
                                    max_runs=noise.max_repeats) is not None

    def null_race_floor(self, n: int) -> float:
        """The all-run mean below which an arm of ``n`` runs leaves the race against ``stop.null_gain``.

        A real effect of ``null_gain`` measures, on the mean of ``n`` runs, at least ``null_gain - sigma/sqrt(n)``
        five times out of six: below that the arm is not worth another run (the one-run rule of
        :meth:`candidates`, carried to ``n`` runs). From ``noise.min_runs`` runs on the floor is the bar itself:
        an arm whose estimate is still below ``null_gain`` there cannot be confirmed better by it without its
        estimate rising, and more runs only wash out the high first run that selected it. On the null landscape
        these repeats kept 12 % of studies from a null verdict within the budget (docs/statistics.md §7).

        Example (``null_gain`` 0.02, run noise 1 %, ``min_runs`` 3): 0.0129 at two runs, 0.02 at three.
        """
        stop = self.space.stop
        if n >= self.space.noise.min_runs:
            return stop.null_gain
        return self.within_reach(stop.null_gain, n)

    def within_reach(self, bar: float, n: int) -> float:
        """The mean of ``n`` runs that a real effect of size ``bar`` measures at least five times out of six: the bar
        less ``sigma / sqrt(n)``. The floor of the null race (:meth:`null_race_floor`), of a contender
        (:meth:`~flagopt.decide._screen.Screen.contender`) and of a rival of the best confirmed arm.

        Example (run noise 1 %): 0.045 for a bar of 0.05 on four runs.
        """
        return bar - self._sigma / math.sqrt(n)

    def _targets(self, leader: Arm | None) -> tuple[float, ...]:
        stop = self.space.stop
        if leader is None:
            return (stop.null_gain, stop.win)
        return (leader.estimate.gain + self.space.noise.min_effect / 2.0,)

    def pick_candidate(self, candidates: Sequence[Arm], arms: Sequence[Arm], leader: Arm | None = None) -> Arm:
        noise = self.space.noise
        # Confirm a would-be winner first, as an engineer would: until one is confirmed every other repeat races
        # against the wrong target (the win bar instead of the best arm).
        if leader is None:
            confirmed = {a.config_key for a in self.winners(arms)}
            rising = [a for a in candidates if a.estimate.gain >= self.space.stop.win and a.config_key not in confirmed]
            if rising:
                return max(rising, key=lambda a: a.estimate.gain)
        else:
            # Against the winner, an arm whose interval lies wholly above the target is short only of the runs a
            # claim needs, and it is the arm that changes the decision: the threshold race ranks it last, being far
            # from the target (rand-win-flaky-140011: double buffering added to the winner read +14.7 % on two runs
            # against the winner's +11.4 %; the last four runs raced a drop-one near the winner's gain instead, and
            # the study ended on the winner, true +10.5 % of a best +14.1 %).
            above = [a for a in candidates if a.n < noise.min_runs and a.estimate.lo >= max(self._targets(leader))]
            if above:
                return max(above, key=lambda a: a.estimate.gain)
        by_label = {a.config_key: a for a in candidates}
        chosen = stats.next_to_sample({k: a.estimate for k, a in by_label.items()}, target=self._targets(leader),
                                      min_runs=noise.min_runs, max_runs=noise.max_repeats)
        return by_label.get(chosen) or max(candidates, key=lambda a: a.estimate.gain)

    def urgent(self, arm: Arm, leader: Arm | None) -> bool:
        """Whether ``arm``'s repeat goes before the rest of the screen: only once a winner is confirmed.

        Before that the screen comes first, as an engineer would do it: a probe confirmed early is usually
        superseded by a better value or by the combination (ppmb re-ran 16 microbatches twice before 32 was probed).
        """
        return leader is not None

    def prediction(self, arm: Arm) -> stats.Prediction | None:
        """The arm's gain and its error as the effects model predicts them from every run (its own included);
        ``None`` before the model is fitted."""
        if self._model is None:
            return None
        return self._model.predict(settings_of_record(self.space, arm.first.attrs.get("settings") or {}))

    def predicted(self, arm: Arm) -> float:
        """The arm's predicted gain (:meth:`prediction`); its own estimate before the model is fitted."""
        prediction = self.prediction(arm)
        if prediction is None:
            return arm.estimate.gain if arm.estimate is not None else 0.0
        return prediction.gain

    def predicted_settings(self, config: TrialConfig) -> float:
        """The gain the effects model predicts for ``config`` (one nobody ran: from the effects alone)."""
        if self._model is None:
            return 0.0
        return self._model.predict(settings_of_record(self.space, config.settings()), own_runs=False).gain
