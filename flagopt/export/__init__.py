"""Export a study's winner as a deployable patch: ``env.sh``, JSON, or an XLA flag string.

Example:
    >>> from flagopt.export import build_export, render
    >>> from flagopt.study import study_data
    >>> text, warnings = render(build_export(study_data(None, "demo")), "env.sh")  # doctest: +SKIP
"""

from __future__ import annotations

from flagopt.export._choose import Choice, NoWinner, choose, gain_text
from flagopt.export._formats import FORMATS, Export, build_export, render, render_env_sh, render_json, render_xla_flags
from flagopt.export._patch import Patch, baseline_for, patch_of

__all__ = [
    "FORMATS", "Choice", "Export", "NoWinner", "Patch", "baseline_for", "build_export", "choose", "gain_text", "patch_of", "render",
    "render_env_sh", "render_json", "render_xla_flags",
]
