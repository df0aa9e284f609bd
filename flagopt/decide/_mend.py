"""A configuration the model proposed that failed, mended: run once more, then split into its parts (issue 25, item 3).

A combination, an add-one variant or a run about a catalog profile sets values that each ran fine alone, so its
failure may be the infrastructure's (a flake that slipped past the classifier: retried once), or one setting that
fails only in company: its drop-one variants find out which, and keep the rest of the gain. An out-of-memory failure
is not retried (it reproduces); it goes straight to the parts.

Example:
    >>> mend_failed(None, [], [], [], None) is None  # nothing failed
    True
"""

from __future__ import annotations

from collections.abc import Sequence

from flagopt.decide import _design as design
from flagopt.decide._blame import DETERMINISTIC, Blame, blamed_by
from flagopt.decide._model import EffectsModel
from flagopt.decide._plan import MODEL_DESIGNS, Plan
from flagopt.decide._profiles import PROFILE_DESIGNS
from flagopt.decide._runs import CANCELLED, RUNNING, RunRecord
from flagopt.failure_classes import OOM
from flagopt.space import Space, TrialConfig


def mend_failed(space: Space, records: Sequence[RunRecord], in_flight: Sequence[Plan], blames: Sequence[Blame],
                model: EffectsModel | None) -> tuple[TrialConfig, str, str] | None:
    """The next run that mends a failed proposal: ``(config, reason, design)``, or ``None`` when none needs it.

    A proposal that failed once (not out of memory) runs once more; one that failed twice (or ran out of memory) runs
    without each of its settings in turn, the weakest by the pooled effects first, skipping what ran or is blamed. A
    variant that still fails deterministically is split the same way, the smallest failing set first.
    """
    flying = {p.config.config_key for p in in_flight}
    by_key: dict[str, list[RunRecord]] = {}
    for rec in records:
        if rec.status in (CANCELLED, RUNNING):
            continue
        # a drop-one variant that failed as deterministically as the proposal it came from still holds what fails:
        # it is split in turn, the smallest failing set first, until the settings that fail together are found
        # (stress-combo-oom: a threshold and a pipelining flag inside a combination of six, one drop-one after
        # another from the six, each failing again, at every threshold the line search tried)
        split_only = rec.attrs.get("design") == "drop-one" and rec.attrs.get("failure_class") in DETERMINISTIC
        if rec.attrs.get("design") in MODEL_DESIGNS + PROFILE_DESIGNS or split_only:
            by_key.setdefault(rec.config_key, []).append(rec)
    tried = {r.config_key for r in records if not r.stopped_with_driver} | flying
    failed = [(key, recs, design.settings_of_record(space, recs[0].attrs.get("settings") or {}))
              for key, recs in by_key.items() if not any(r.ok for r in recs) and key not in flying]
    for key, recs, settings in sorted(failed, key=lambda f: len(f[2])):
        label = recs[0].profile
        failure = recs[-1].attrs.get("failure_class") or recs[-1].status
        if len(recs) == 1 and failure != OOM and recs[0].attrs.get("design") != "drop-one":
            config = design.config_of_settings(space, settings, kind="probe", profile=label)
            return config, f"once more after {failure}: its settings each ran fine alone", \
                str(recs[0].attrs.get("design"))
        if len(settings) < 2:
            continue
        order = sorted(settings, key=lambda n: model.effect(n, settings[n])[0] if model is not None else 0.0)
        for name in order:
            rest = {k: v for k, v in settings.items() if k != name}
            config = design.config_of_settings(space, rest, kind="probe", profile=f"{label} without {name}")
            if config.config_key not in tried and blamed_by(blames, rest) is None:
                return config, f"{label} failed twice ({failure}): which of its settings fails in company?", \
                    "drop-one"
    return None
