"""Pre-flight: ask the installed XLA which flags (and values) it accepts, before any job is submitted.

XLA parses ``XLA_FLAGS`` when the first backend starts and aborts the process on an unknown flag or a value it
cannot interpret (measured with jaxlib 0.10.2: ``=maybe`` for a bool, ``1e3`` for an int and an unknown enum
name all abort, with "Couldn't interpret value", "Illegal value" or a bare "Flag parsing failed"). A bad value
stops parsing *before* unknown flags are reported, so a failing set is narrowed down flag by flag.

The check starts ``python -c "import jax; jax.devices()"`` with ``JAX_PLATFORMS=cpu``: CPU wheels register the
same flags as GPU builds (GPU flags are accepted and ignored), so no accelerator is needed. It checks the jaxlib
of *that* interpreter; the report names the version so a mismatch with the cluster's image is visible.

Example:
    >>> report = preflight([["--xla_gpu_enable_latency_hiding_scheduler=true"]])
    >>> report.status
    'ok'
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from flagopt.flags._registry import FlagRegistry, flag_name
from flagopt.flags._unknown import parse_flag_rejection

_MARK = "FLAGOPT_PREFLIGHT_OK"
_PROBE = (
    "import jax, jaxlib\n"
    "jax.devices()\n"
    f"print({_MARK!r}, jax.__version__, getattr(jaxlib, '__version__', '?'))\n"
)
_MAX_WORKERS = 8
#: a jax start that timed out is tried once more with this limit (at least): a busy login node, or many studies
#: started at once, can make ``import jax`` take minutes; a timeout is "could not check", never a rejection
RETRY_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class FlagCheck:
    """One flag XLA refused.

    Attributes:
        flag: the token as given (``--name=value``).
        name: the bare flag name.
        problem: ``unknown`` (not a flag of this jaxlib), ``bad-value`` or ``error`` (the check itself failed).
        message: what to do about it, with the registry's removal note where it has one.
    """

    flag: str
    name: str
    problem: str
    message: str


@dataclass(frozen=True)
class SetCheck:
    """The verdict on one flag set: ``ok``, or the flags that make it fail."""

    flags: tuple[str, ...]
    ok: bool
    problems: tuple[FlagCheck, ...]
    #: false when jax did not start within the limits (a busy host): not checked, and not taken as rejected
    checked: bool = True


@dataclass(frozen=True)
class PreflightReport:
    """The outcome of :func:`preflight`.

    ``status`` is ``ok`` (every set accepted), ``failed`` (some flag rejected) or ``skipped`` (jax could not be
    started in that interpreter: nothing was checked, see ``reason``).
    """

    status: str
    reason: str
    python: tuple[str, ...]
    jax_version: str | None = None
    jaxlib_version: str | None = None
    sets: tuple[SetCheck, ...] = ()

    @property
    def unchecked(self) -> tuple[SetCheck, ...]:
        """The sets jax did not start with in time: neither accepted nor rejected."""
        return tuple(result for result in self.sets if not result.checked)

    @property
    def problems(self) -> tuple[FlagCheck, ...]:
        """Every distinct rejected flag, in the order first met."""
        seen: dict[str, FlagCheck] = {}
        for result in self.sets:
            for check in result.problems:
                seen.setdefault(check.flag, check)
        return tuple(seen.values())

    def summary(self) -> str:
        """A few lines for people."""
        if self.status == "skipped":
            return f"pre-flight skipped: {self.reason}"
        head = (f"pre-flight against jax {self.jax_version} / jaxlib {self.jaxlib_version} "
                f"({' '.join(self.python)}): {self.status}")
        late = (f"  {len(self.unchecked)} flag set(s) not checked: jax did not start within "
                f"{RETRY_TIMEOUT_S:g} s (a busy host?); they are not taken as rejected",) if self.unchecked else ()
        return "\n".join([head, *(f"  {c.flag}: {c.message}" for c in self.problems), *late])


@dataclass(frozen=True)
class _Run:
    ok: bool
    output: str
    versions: tuple[str, str] | None
    timed_out: bool = False


def _xla_flags(flags: Sequence[str]) -> str:
    parts = []
    for token in flags:
        name, sep, value = token.partition("=")
        # XLA's own tokenizer understands --name="a b"; anything else splits on whitespace.
        parts.append(f'{name}="{value}"' if sep and any(ch.isspace() for ch in value) else token)
    return " ".join(parts)


def _run(python: Sequence[str], flags: Sequence[str] | None, timeout_s: float) -> _Run:
    """One jax start; a timeout is tried again with :data:`RETRY_TIMEOUT_S` before it is reported as such."""
    run = _start(python, flags, timeout_s)
    if run.timed_out and RETRY_TIMEOUT_S > timeout_s:
        run = _start(python, flags, RETRY_TIMEOUT_S)
    return run


def _start(python: Sequence[str], flags: Sequence[str] | None, timeout_s: float) -> _Run:
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "JAX_PLATFORMS")}
    env["JAX_PLATFORMS"] = "cpu"
    if flags:
        env["XLA_FLAGS"] = _xla_flags(flags)
    try:
        done = subprocess.run(
            [*python, "-c", _PROBE], env=env, capture_output=True, text=True, timeout=timeout_s,
            stdin=subprocess.DEVNULL, check=False,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        return _Run(False, f"timed out after {timeout_s:g} s", None, timed_out=True)
    except OSError as exc:
        return _Run(False, f"cannot run {python[0]}: {exc}", None)
    output = done.stdout + done.stderr
    for line in done.stdout.splitlines():
        if line.startswith(_MARK) and done.returncode == 0:
            _, jax_v, jaxlib_v = (line.split() + ["?", "?"])[:3]
            return _Run(True, output, (jax_v, jaxlib_v))
    return _Run(False, output, None)


def _last_line(output: str) -> str:
    lines = [line.strip() for line in output.splitlines() if line.strip() and not line.lstrip().startswith("--")]
    return lines[-1][:300] if lines else "no output"


def _diagnose(token: str, run: _Run, registry: FlagRegistry, jaxlib: str) -> FlagCheck | None:
    if run.ok or run.timed_out:
        return None
    name = flag_name(token)
    rejection = parse_flag_rejection(run.output)
    if rejection is not None and not rejection.bad_values and rejection.flags:
        note = registry.removal_note(name) or registry.added_note(name) or "not in the flag registry; check the name"
        if rejection.typos:
            note = "written with a look-alike dash; use '--'"
        return FlagCheck(token, name, "unknown", f"jaxlib {jaxlib} does not know it: {note}")
    if rejection is not None:
        value = token.partition("=")[2]
        info = registry.get(name)
        valid = f"valid values: {info.valid_values}" if info and info.valid_values else "see XLA's flag list"
        hint = registry.check_value(name, value) or valid
        return FlagCheck(token, name, "bad-value", f"jaxlib {jaxlib} cannot parse the value {value!r} ({hint})")
    return FlagCheck(token, name, "error", f"jax failed to start with this flag: {_last_line(run.output)}")


def preflight(
    xla_flag_sets: Sequence[Sequence[str]],
    *,
    python: str | Sequence[str] = sys.executable,
    timeout_s: float = 10.0,
    registry: FlagRegistry | None = None,
) -> PreflightReport:
    """Check every ``XLA_FLAGS`` set against the jaxlib installed in ``python``.

    Args:
        xla_flag_sets: flag sets as they will be rendered, e.g. ``[["--xla_a=true", "--xla_b=1"], ...]``.
        python: the interpreter (or a command prefix such as ``[python, "-S"]``) whose jax is checked.
        timeout_s: the limit for each jax start.
        registry: where removal notes come from (default: the shipped table).

    Returns:
        A report; ``status="skipped"`` with the reason when jax cannot be started there.
    """
    command = (python,) if isinstance(python, str) else tuple(python)
    registry = registry or FlagRegistry.load()
    sets = [tuple(flags) for flags in xla_flag_sets]
    with ThreadPoolExecutor(max_workers=max(1, min(_MAX_WORKERS, len(sets) + 1))) as pool:
        probe_future = pool.submit(_run, command, None, timeout_s)
        set_runs = list(pool.map(lambda flags: _run(command, flags, timeout_s), sets))
        probe = probe_future.result()
    if probe.timed_out:
        return PreflightReport("skipped", f"jax did not start within {RETRY_TIMEOUT_S:g} s in {' '.join(command)} "
                               "(a busy host?): nothing was checked", command)
    if not probe.ok or probe.versions is None:
        return PreflightReport("skipped", f"jax does not start in {' '.join(command)}: {_last_line(probe.output)}",
                               command)  # fmt: skip
    jax_v, jaxlib_v = probe.versions
    accepted = {token for flags, run in zip(sets, set_runs) if run.ok for token in flags}
    failed = [(flags, run) for flags, run in zip(sets, set_runs) if not run.ok and not run.timed_out]
    suspects = sorted({token for flags, _ in failed for token in flags} - accepted)
    with ThreadPoolExecutor(max_workers=max(1, min(_MAX_WORKERS, len(suspects)))) as pool:
        single = dict(zip(suspects, pool.map(lambda token: _run(command, [token], timeout_s), suspects)))
    results = []
    for flags, run in zip(sets, set_runs):
        if run.ok or run.timed_out:
            results.append(SetCheck(flags, True, (), checked=not run.timed_out))
            continue
        checks = [_diagnose(token, single[token], registry, jaxlib_v) for token in flags if token in single]
        problems = tuple(check for check in checks if check is not None)
        if not problems and any(single[token].timed_out for token in flags if token in single):
            results.append(SetCheck(flags, True, (), checked=False))  # a flag alone could not be checked: unknown
            continue
        if not problems:  # every flag passes alone: the combination fails (or parsing stopped early)
            problems = (FlagCheck(" ".join(flags), "", "error", f"the set fails as a whole: {_last_line(run.output)}"),)
        results.append(SetCheck(flags, False, problems))
    status = "ok" if all(result.ok for result in results) else "failed"
    reason = "every set was accepted" if status == "ok" else f"{sum(not r.ok for r in results)} set(s) rejected"
    return PreflightReport(status, reason, command, jax_v, jaxlib_v, tuple(results))
