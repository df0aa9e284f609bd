"""Render an export as ``env.sh`` (a guarded, shell-quoted patch), JSON, or a bare XLA flag string."""

from __future__ import annotations

import datetime as dt
import json
import re
import shlex
from dataclasses import dataclass, field
from typing import Any

from flagopt import __version__
from flagopt.errors import FlagoptError
from flagopt.export._choose import Choice, choose
from flagopt.export._patch import ENV_NAME, Patch, baseline_for, patch_of
from flagopt.study import StudyData

FORMATS = ("env.sh", "json", "xla-flags")
SCHEMA = "flagopt.export/1"
_CONTROL = re.compile(r"[\x00-\x1f\x7f]+")


@dataclass(frozen=True)
class Export:
    """Everything an export format needs: the choice, its patch, where it came from, and the guard."""

    study: str
    choice: Choice
    patch: Patch
    provenance: dict[str, Any]
    guard_variable: str | None = None
    guard_value: str | None = None
    warnings: tuple[str, ...] = field(default=())


def build_export(data: StudyData, trial: int | None = None) -> Export:
    """Choose the run, compute its patch and collect its provenance (no output is written here)."""
    choice = choose(data, trial)
    run = choice.record
    patch = patch_of(run, baseline_for(run, data.all_records), source=f"{data.name}: trial {run.number}")
    spec = data.space.get("export") or {}
    guard_variable = spec.get("guard_variable") or "FLAGOPT_PARALLELISM"
    guarded = bool(spec.get("guard", True)) and bool(data.parallelism)
    if guarded and not ENV_NAME.match(str(guard_variable)):
        raise FlagoptError(data.name, "export.guard_variable", f"{guard_variable!r} is not a variable name")
    info = dict(run.attrs.get("run_info") or {})
    versions = {k: v for k, v in sorted(info.items()) if k.endswith("_version")}
    provenance = {
        "study": data.name, "trial": run.number, "label": choice.label, "confirmed": choice.confirmed,
        "why": choice.why, "gain": choice.gain, "ci": list(choice.ci) if choice.ci else None, "runs": choice.runs,
        "fresh_runs": choice.fresh_runs, "all_runs_gain": choice.all_runs_gain,
        "all_runs_ci": list(choice.all_runs_ci) if choice.all_runs_ci else None,
        "verdict": choice.verdict, "model_tag": data.model_tag, "parallelism": data.parallelism,
        "nodelist": data.executor.get("nodelist"), "host": run.attrs.get("host"), "job_id": run.attrs.get("job_id"),
        "versions": versions, "device_kind": info.get("device_kind"), "num_devices": info.get("num_devices"),
        "exported_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), "flagopt": __version__,
    }
    warnings = (() if choice.confirmed else (f"flagopt: {choice.headline}",)) + \
        ((f"flagopt: {choice.numerics_warning}",) if choice.numerics_warning else ())
    provenance["numerics"] = choice.numerics
    return Export(study=data.name, choice=choice, patch=patch, provenance=provenance,
                  guard_variable=str(guard_variable) if guarded else None,
                  guard_value=data.parallelism if guarded else None, warnings=warnings)


def _comment(text: str) -> str:
    # A newline in a recorded value would end the comment and turn the rest into a command.
    return "# " + _CONTROL.sub(" ", text)


def render_env_sh(ex: Export) -> str:
    """A bash patch to ``source`` after the deployed environment; ``bash -n`` clean, every value quoted."""
    p, c = ex.provenance, ex.choice
    lines = ["# flagopt export: source this after the deployed environment is set (bash).",
             _comment(f"study {p['study']}, trial {p['trial']} ({p['label']})"),
             _comment(c.headline),
             *([_comment(c.numerics_warning)] if c.numerics_warning else []),
             _comment(f"model_tag {p['model_tag']} · parallelism {p['parallelism'] or '-'} · "
                      f"nodelist {p['nodelist'] or '-'} · host {p['host'] or '-'} · job {p['job_id'] or '-'}")]
    if p["versions"] or p["device_kind"]:
        found = ", ".join(f"{k.removesuffix('_version')} {v}" for k, v in p["versions"].items())
        device = f"{p['num_devices'] or '?'} x {p['device_kind']}" if p["device_kind"] else ""
        lines.append(_comment("; ".join(x for x in (found, device) if x)))
    lines.append(_comment(f"exported {p['exported_at']} by flagopt {p['flagopt']}"))
    lines.append("# XLA flags are appended: XLA reads a repeated flag last-wins, so these override the deployed ones.")
    # POSIX sh first: without this, sh stops at `[[` and the guard's else branch says "not applied" (misleading).
    lines.append('if [ -z "${BASH_VERSION:-}${ZSH_VERSION:-}" ]; then echo "flagopt: this patch needs bash: '
                 "source it from bash (bash -c '. ./env.sh && your-command'), not sh\" >&2; "
                 "return 1 2>/dev/null || exit 1; fi")
    body: list[str] = []
    if not c.confirmed:
        body.append(f"echo {shlex.quote('flagopt: WARNING: ' + _CONTROL.sub(' ', c.headline))} >&2")
    if c.numerics_warning:
        body.append(f"echo {shlex.quote('flagopt: WARNING: ' + _CONTROL.sub(' ', c.numerics_warning))} >&2")
    for variable, tokens in ex.patch.flags.items():
        body.append(f'export {variable}="${{{variable}:+${variable} }}"{shlex.quote(" ".join(tokens))}')
    for name, value in ex.patch.env.items():
        body.append(f"unset {name}" if value is None else f"export {name}={shlex.quote(value)}")
    if ex.patch.args:
        body.append('# workload arguments: append them to the training command, e.g. '
                    'python -m train ... "${FLAGOPT_WORKLOAD_ARGS[@]}"')
        body.append("FLAGOPT_WORKLOAD_ARGS=(" + " ".join(shlex.quote(a) for a in ex.patch.args) + ")")
    if ex.patch.empty:
        body.append(": # this run sets nothing on top of the deployed environment")
    if ex.guard_variable:
        var, cell = ex.guard_variable, shlex.quote(ex.guard_value or "")
        lines += [f"# Applies only to the cell it was tuned on: set {var} to say which cell a job runs.",
                  f"_flagopt_cell={cell}",
                  f'if [[ "${{{var}:-$_flagopt_cell}}" == "$_flagopt_cell" ]]; then',
                  *("  " + b for b in body),
                  "else",
                  f'  echo "flagopt: patch tuned for $_flagopt_cell not applied ({var}=${{{var}-}})" >&2',
                  "fi",
                  "unset _flagopt_cell"]
    else:
        lines += body
    return "\n".join(lines) + "\n"


def render_json(ex: Export) -> str:
    """The export as JSON for tools (``schema`` names the version of this layout)."""
    doc = {"schema": SCHEMA, **ex.provenance,
           "append": {k: list(v) for k, v in ex.patch.flags.items()},
           "set": {k: v for k, v in ex.patch.env.items() if v is not None},
           "unset": [k for k, v in ex.patch.env.items() if v is None],
           "args": list(ex.patch.args), "settings": ex.choice.record.attrs.get("settings"),
           "guard": {"variable": ex.guard_variable, "value": ex.guard_value} if ex.guard_variable else None,
           "env": ex.choice.record.attrs.get("env")}
    return json.dumps(doc, indent=2, default=str) + "\n"


def render_xla_flags(ex: Export) -> tuple[str, list[str]]:
    """The XLA flags to append, one line; plus warnings about what a bare flag string cannot carry."""
    notes = []
    rest = [k for k in ex.patch.flags if k != "XLA_FLAGS"] + list(ex.patch.env) + list(ex.patch.args)
    if rest:
        notes.append(f"flagopt: --format xla-flags leaves out {', '.join(rest)}; use --format env.sh for the full patch")
    return " ".join(ex.patch.flags.get("XLA_FLAGS", ())) + "\n", notes


def render(ex: Export, fmt: str) -> tuple[str, list[str]]:
    """The text of ``fmt`` and the warnings to print to stderr."""
    if fmt == "env.sh":
        return render_env_sh(ex), list(ex.warnings)
    if fmt == "json":
        return render_json(ex), list(ex.warnings)
    if fmt == "xla-flags":
        text, notes = render_xla_flags(ex)
        return text, [*ex.warnings, *notes]
    raise FlagoptError("--format", fmt, f"unknown export format (use one of {', '.join(FORMATS)})")


