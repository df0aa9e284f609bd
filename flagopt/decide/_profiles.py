"""A catalog profile as a starting point: a recipe that failed, run without the settings that fail alone; a recipe
far below the deployed job, run without each of its settings in turn; a recipe with the params the effects model says
could still be added to it (statistics.md §10).

A published recipe carries settings the search space does not offer (``target:key`` in the engine's vocabulary),
some of which pay only inside it (the 2×H200 job of issue 25: triton_gemm=false cost 1.7 points alone and paid in
the recipe). The combination is built from params only, so a recipe that measured below the best single probe, or
failed outright, never met the settings that measured well alone: on the held-out ``rand-recipe`` family the study
ended 6-9 points short of a best that was the recipe plus one such setting, or the recipe without the one setting
that runs out of memory on this job.

Example:
    >>> has_own_settings({"xla:xla_gpu_enable_triton_gemm": False, "overlap": 2}), has_own_settings({"overlap": 2})
    (True, False)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from flagopt.decide import _design as design
from flagopt.decide._arms import Arm
from flagopt.decide._blame import Blame, blamed_by
from flagopt.decide._model import EffectsModel
from flagopt.decide._plan import asked_before
from flagopt.decide._runs import CANCELLED, RUNNING, RunRecord
from flagopt.space import Space, TrialConfig, render_value

#: The design of a failed profile's run without the settings that failed alone (:func:`profile_without_failures`).
PROFILE_REST = "profile-rest"
#: The design of a profile's run with what the model says could still be added to it (:func:`profile_add_one`).
PROFILE_ADD_ONE = "profile-add-one"
#: The design of the best measured recipe's run with another catalog profile's settings (:func:`profile_union`).
PROFILE_UNION = "profile-union"
#: All three: runs about a catalog profile, one per profile, outside the model's proposal budget.
PROFILE_DESIGNS = (PROFILE_REST, PROFILE_ADD_ONE, PROFILE_UNION)
#: The design of a profile's run without one of its settings, each in turn (:func:`profile_drop_one`): a diagnosis,
#: not retried or split when it fails (the drop-ones of the other settings go on).
PROFILE_DROP = "profile-drop-one"
#: At most this many profiles a study start a profile add-one, the best measured first: the shipped catalog spaces
#: offer up to four profiles with settings of their own, and each is one more run of the budget.
MAX_PROFILE_STARTS = 2
#: At most this many runs of the best recipe with another catalog profile, the best measured first; once a recipe's
#: add-one measures best, as many again of it with the other profiles.
MAX_PROFILE_UNIONS = 2
#: How a profile add-one's label names a param moved from the profile's value (``NAME=NEW for OLD``), and how the
#: label of its twin with the profile's own values ends (:func:`profile_add_one`): words for people. The engine finds
#: a profile's add-ones by their label's ``<profile> + `` prefix and reads what moved from their settings.
MOVED = " for "
OWN_VALUES_KEPT = "its own values kept"
#: A profile's param value is dropped from it when its pooled effect is this many standard errors below a loss of
#: ``stop.null_gain`` (:func:`profile_without_harm`): only a clear cost, not a setting that pays only in company.
HARM_SE = 2.0


def has_own_settings(settings: Mapping[str, Any]) -> bool:
    """Whether ``settings`` (param name -> value) set a flag no param declares: a catalog profile's own."""
    return any(design.is_own_setting(name) for name in settings)


def profile_without_failures(space: Space, records: Sequence[RunRecord], blames: Sequence[Blame],
                             tried: set[str]) -> tuple[dict[str, Any], str] | None:
    """A catalog profile that never ran, failing for a reason a blame explains (a setting of it failed alone) or on
    flags the installed XLA rejects (its failure names them): its settings without those, and a label; ``None`` when
    there is none left to run.

    An engineer whose recipe runs out of memory on this job, or was written for another jaxlib, drops the setting
    that fails and keeps the rest: the recipe's other settings may be where the gain is.
    """
    ran = {r.config_key for r in records if r.ok}
    asked = asked_before(PROFILE_REST, records)
    for rec in records:
        if rec.kind != "profile" or rec.ok or rec.status in (CANCELLED, RUNNING) or rec.config_key in ran \
                or any(a.startswith(f"{rec.profile} without ") for a in asked):
            continue  # once a profile: a blame found later would otherwise start another
        settings = design.settings_of_record(space, rec.attrs.get("settings") or {})
        # a flag the failure names unknown is blamed at every value (blame_failures): no second read of its message
        blamed = [n for n, v in settings.items() if blamed_by(blames, {n: v}) is not None]
        if (found := _without(space, rec.profile, settings, blamed, tried)) is not None:
            return found
    return None


def profile_without_harm(space: Space, records: Sequence[RunRecord], model: EffectsModel | None,
                         tried: set[str]) -> tuple[dict[str, Any], str] | None:
    """A measured catalog profile with settings of its own that also sets a param value the runs show costing more
    than ``stop.null_gain`` (its pooled effect plus ``HARM_SE`` standard errors below ``-null_gain``): its settings
    without those, and a label; ``None`` when there is none left to run.

    An engineer whose recipe carries a setting that measured 41 % slower alone on this job drops it and keeps the
    rest, as for a setting that runs out of memory (rand-recipe-4014: the recipe's double buffering cost 41 % alone;
    the recipe without it, +11 %, never ran, and the study ended on +3.6 %). Not a recipe's own settings: their
    effects come from the recipe's runs, and some of them pay only there. Once a profile, as
    :func:`profile_without_failures` (one label each).
    """
    if model is None:
        return None
    asked = asked_before(PROFILE_REST, records)
    done: set[str] = set()
    for rec in records:
        if rec.kind != "profile" or not rec.ok or rec.profile in done \
                or any(a.startswith(f"{rec.profile} without ") for a in asked):
            continue
        done.add(rec.profile)
        settings = design.settings_of_record(space, rec.attrs.get("settings") or {})
        if not has_own_settings(settings):
            continue  # a profile of params only: the combination covers it
        loss = space.stop.null_gain
        harmful = [n for n, v in settings.items() if not design.is_own_setting(n) and _costs(model, n, v, loss)]
        if (found := _without(space, rec.profile, settings, harmful, tried)) is not None:
            return found
    return None


def profile_drop_one(space: Space, records: Sequence[RunRecord], arms: Sequence[Arm], sigma: float,
                     tried: set[str]) -> tuple[dict[str, Any], str] | None:
    """A measured catalog profile clearly below the deployed job (:func:`~flagopt.decide._design.clear_drop`: further
    than drift and noise reach) whose cost no rule above explained (no run of it without a failing or costly setting
    was asked): its settings without the next one of them not ``tried``, in name order, and a label; ``None`` when
    there is none left to run.

    An engineer whose recipe came out 31 % slower while each of its settings measured fine alone has found a
    conflict between two of them, and drops them one at a time: rand-recipe-22017's recipe (its own
    rematerialization setting, double buffering, the pipelined all-gather) measured -31 %, the pipelined all-gather
    and double buffering +4.9 and +3.1 % alone; without the all-gather it is +10.5 % (the best +10.7 %), and no
    run of the study set it (it ended `null`). A good drop-one is a base the model's additions start from
    (:func:`profile_add_one`). Measured in docs/benchmark-decisions.md (fortieth-session note).
    """
    explained = asked_before(PROFILE_REST, records)
    for arm in arms:
        if arm.first.kind != "profile" or arm.estimate is None or arm.estimate.gain > -design.clear_drop(sigma):
            continue
        settings = design.settings_of_record(space, arm.first.attrs.get("settings") or {})
        if len(settings) < 2 or any(a.startswith(f"{arm.label} without ") for a in explained):
            continue  # a setting that fails or costs alone explained it (profile_without_failures, _harm)
        for name in sorted(settings):  # a drop-one asked before is tried: its configuration ran
            if (found := _without(space, arm.label, settings, [name], tried)) is not None:
                return found
    return None


def _without(space: Space, profile: str, settings: dict[str, Any], dropped: list[str],
             tried: set[str]) -> tuple[dict[str, Any], str] | None:
    """A profile's ``settings`` without ``dropped``, and its label (``<profile> without <names>``); ``None`` when
    nothing is dropped, nothing is left, or that configuration was tried."""
    rest = {n: v for n, v in settings.items() if n not in dropped}
    if not dropped or not rest:
        return None
    config = design.config_of_settings(space, rest, kind="probe", profile="")
    return (rest, f"{profile} without {', '.join(dropped)}") if config.config_key not in tried else None


def _costs(model: EffectsModel, name: str, value: Any, loss: float) -> bool:
    """Whether the runs show setting ``name`` to ``value`` costing more than ``loss`` (``HARM_SE`` standard errors)."""
    effect, se = model.effect(name, value)
    return effect + HARM_SE * se < -loss


def profile_bases(space: Space, arms: Sequence[Arm]) -> list[tuple[dict[str, Any], str]]:
    """The measured catalog profiles that carry settings of their own (or what ran of one that failed,
    :func:`profile_without_failures`), best estimate first: their settings and labels."""
    out = []
    for arm in sorted(arms, key=lambda a: -a.estimate.gain if a.estimate is not None else 0.0):
        settings = design.settings_of_record(space, arm.first.attrs.get("settings") or {})
        if arm.estimate is not None and has_own_settings(settings) \
                and (arm.first.kind == "profile" or arm.first.attrs.get("design") in (PROFILE_REST, PROFILE_DROP)):
            out.append((settings, arm.label))
    return out


def better_values(model: EffectsModel, base: Mapping[str, Any], deployed: Mapping[str, str | None],
                  blames: Sequence[Blame]) -> dict[str, Any]:
    """The params ``base`` sets to a value the runs show worse than another of its values (the param's best by the
    pooled effects, not the deployed one, not blamed) by more than one standard error of the difference: name -> that
    value. Dropping a setting is a drop-one's question, not this one: a boolean has no other value to move to."""
    out: dict[str, Any] = {}
    for name, (value, effect, se) in model.best_values().items():
        if name not in base or design.is_own_setting(name) or render_value(value) == render_value(base[name]) \
                or design.same_value(model.space.param(name), value, deployed.get(name)) \
                or blamed_by(blames, {name: value}) is not None:
            continue
        here, se_here = model.effect(name, base[name])
        if effect - here > math.hypot(se, se_here):
            out[name] = value
    return out


def profile_add_one(space: Space, arms: Sequence[Arm], additions: Callable[[dict[str, Any]], dict[str, Any]],
                    better: Callable[[dict[str, Any]], dict[str, Any]],
                    fresh: Callable[[dict[str, Any], str], TrialConfig | None],
                    asked: Sequence[tuple[str, Mapping[str, Mapping[str, Any]]]]) -> TrialConfig | None:
    """The first measured profile (:func:`profile_bases`) not yet run with what ``additions(base)`` (the effects
    model) says could be added to it, and its params moved to the values ``better(base)`` the runs show better
    (:func:`better_values`): that configuration, once per profile and for ``MAX_PROFILE_STARTS`` profiles a study
    (``asked``: the labels and settings of the study's runs of this design, in flight included,
    :func:`~flagopt.decide._plan.asked_settings`), or ``None``. Where that run moved a param, the next is the same
    run with the profile's own values kept (``OWN_VALUES_KEPT``).

    Once, whatever the model predicts: an additive model reads a recipe from its own run, and a recipe whose settings
    pay only with a partner it lacks (or that carries one value this job does not like) measures low alone. On the
    held-out rand-recipe family, with the add-one gated by the model's prediction, the best needed a setting only
    the recipe sets in 34 of the 36 studies that ended more than 1 % short of it (docs/benchmark-decisions.md,
    twenty-fourth session).

    Both ways when a value moved: the move reads the param alone, and a recipe's value may pay only with the recipe's
    other settings. rand-recipe-2013: the recipe's overlap limit of 2 (the best's) was moved to 3 on the pooled
    effects, and that run measured +5.5 % (true +6.0 %); with 2 kept it measured +7.8 % (true +6.9 %), and the study
    ended on the true best, +10.4 %, where without the twin it ended at +8.7 %. On the held-out rand-recipe family
    (seeds 1000-7029), within 1 % of the best 174 -> 177 of 210; on its flaky copy 146 -> 144 of 180, a study or two
    a set either way (docs/benchmark-decisions.md, forty-third session).
    """
    bases = profile_bases(space, arms)
    # The add-ones each profile started (the twin read from the first one's settings, not recomputed: the model's
    # additions change with every fit, and the twin asks of the profile's values alone).
    started = {label: [design.settings_of_record(space, s) for a, s in asked if a.startswith(f"{label} + ")]
               for _, label in bases}
    for base, label in bases:
        if len(started[label]) != 1:
            continue  # not started, or both ways asked
        first = started[label][0]
        kept = {n: v for n, v in base.items() if render_value(first.get(n)) != render_value(v)}
        if not kept:
            continue  # it moved nothing
        extra = {n: v for n, v in first.items() if n not in base}
        words = [design.probe_label(space.param(n), v) for n, v in extra.items()] + [OWN_VALUES_KEPT]
        config = fresh({**first, **kept}, f"{label} + " + ", ".join(words))
        if config is not None:
            return config
    if sum(1 for runs in started.values() if runs) >= MAX_PROFILE_STARTS:
        return None
    for base, label in bases:
        if started[label]:
            continue
        extra, moved = additions(base), better(base)
        if not (extra or moved):
            continue
        words = [design.probe_label(space.param(n), v) for n, v in extra.items()]
        words += [f"{design.probe_label(space.param(n), v)}{MOVED}{render_value(base[n])}" for n, v in moved.items()]
        config = fresh({**base, **moved, **extra}, f"{label} + " + ", ".join(words))
        if config is not None:
            return config
    return None


def profile_union(space: Space, arms: Sequence[Arm], fresh: Callable[[dict[str, Any], str], TrialConfig | None],
                  asked: Sequence[tuple[str, Mapping[str, Mapping[str, Any]]]]) -> TrialConfig | None:
    """The best measured profile with settings of its own (:func:`profile_bases`) with the settings of another
    measured catalog profile added, the best measured first: that configuration, for at most ``MAX_PROFILE_UNIONS``
    other profiles a study (``asked``: this design's runs, in flight included), or ``None``. Where the two set one
    setting to different values the other profile's stands: stacked on a recipe, a profile is a deliberate change
    of it (rand-recipe-1007: the recipe's NCCL protocol LL128 swapped for the LL of another profile is the best).

    Once each, whatever the model predicts: a catalog's profiles are written to be stacked (a recipe and the NCCL
    protocol its authors ran it with), and a recipe's settings may pay only with another profile's value. On the
    held-out rand-recipe family the recipe with another profile was within 1 % of the best where the study ended
    4-7 points short of it (rand-recipe-1007: the recipe +0.4 %, an NCCL protocol +1.2 %, both +11.1 %, the best
    +11.5 %); docs/benchmark-decisions.md, forty-ninth session.
    """
    bases = profile_bases(space, arms)
    if not bases:
        return None
    base, label = bases[0]
    # A recipe's add-one that measures above every profile is the recipe the study found: the other profiles are
    # stacked on it too (rand-recipe-60009: the recipe without cudnn fMHA plus Tree led at +3.0 %; the Simple
    # protocol, -12 % alone, was stacked on the recipe's drop-one measured best early, never on it; both: +13.1 %)
    base_gain = max(a.estimate.gain for a in arms if a.label == label and a.estimate is not None)
    grown = [a for a in arms if a.first.attrs.get("design") == PROFILE_ADD_ONE and a.estimate is not None
             and a.estimate.gain > base_gain]
    rounds = 1
    if grown and sum(1 for a, _ in asked if a.startswith(f"{label} + ")) >= MAX_PROFILE_UNIONS:
        best = max(grown, key=lambda a: a.estimate.gain)  # type: ignore[union-attr]
        base, label, rounds = design.settings_of_record(space, best.first.attrs.get("settings") or {}), best.label, 2
    if len(asked) >= rounds * MAX_PROFILE_UNIONS:
        return None
    others = [a for a in arms if a.first.kind == "profile" and a.estimate is not None and a.label != label
              and not label.startswith(f"{a.label} ")]
    for arm in sorted(others, key=lambda a: (-a.estimate.gain, a.label)):  # type: ignore[union-attr]
        settings = design.settings_of_record(space, arm.first.attrs.get("settings") or {})
        extra = {n: v for n, v in settings.items() if n not in base or render_value(base[n]) != render_value(v)}
        if extra and (config := fresh({**base, **extra}, f"{label} + {arm.label}")) is not None:
            return config
    return None
