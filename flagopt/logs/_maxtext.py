r"""MaxText ``completed step`` lines, in every format MaxText printed from 2023 to 2026.

The variants seen (fixtures under ``tests/fixtures/logs/``, public MaxText sources, and the formats reported in
the wild); each one is parsed by the same two regular expressions below:

1. The current line (metric_logger, 2024-2026)::

       completed step: 3, seconds: 0.324, TFLOP/s/device: 651.649, Tokens/s/device: 50574.620, total_weights: 32768, loss: 2.345

   ``loss: nan`` appears in benchmark runs without a real loss (``log_base_a.txt``); the c4 variant has
   ``total_weights`` below the token count (``01_..._deepseek2_16b``).
2. Mid-2024 GPU runs: ``Tokens/s/device`` but no ``total_weights`` (``07_..._gpt3_175b``).
3. Early 2024: no ``Tokens/s/device`` at all, only ``seconds``, ``TFLOP/s/device`` and ``loss``
   (``02_..._llama2_7b``); here the throughput is derived from ``seconds`` (see :func:`flagopt.logs.parse_steps`).
4. 2023: ``TFLOP/s:`` instead of ``TFLOP/s/device:`` (the same per-device number); some forks pad the key,
   ``TFLOP/s       : 12.3``.
5. The very first format: ``loss 1.234`` with no colon (``key value`` pairs are read like ``key: value``).
6. Extra trailing fields: ``lr: 1.000e-04``, ``grad_norm``, ``main_model_loss``, ``mtp_loss``, ``lm_loss``,
   ``perplexity``, ``moe_lb_loss``... all land in :attr:`StepSample.fields`.
7. Prefixes before ``completed step``, all ignored:

   * ``# `` when a script echoes the log as comments (``02_...``);
   * absl logging: ``I0317 10:00:13.224641 1253 metric_logger.py:181] completed step: ...``;
   * Ray: ``(run_maxtext_train pid=78967, ip=10.130.0.11) completed step: ...``, with a trailing
     ``[repeated 9x across cluster]`` when Ray folded identical lines, which hides the folded steps
     (``05_..._ray``: steps 0, 4, 9, 14, 89, 94, 99 are all that is left);
   * ``[Rampup Batch Size Phase], completed step: ...`` during batch-size ramp-up, without the throughput fields
     (a ``tokens_per_step`` derivation assumes the full batch there too: keep the window after the ramp-up).

8. Multi-host runs print every step once per host (``05_...`` prints step 99 twice, with different numbers;
   ``01_...`` repeats steps 8 and 9): the first print of a step is kept. Other processes' lines in between are
   skipped, and two step lines run together on one line are split at the second ``completed step``.

Not step lines: ``eval metrics after step: ...`` and ``completed profiler activation/deactivation step: ...``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from flagopt.logs._sample import NUMBER

_STEP = re.compile(r"completed step:?\s*(\d+)(?!\d|\.\d)")
# ``key: value``, ``key : value``, ``key=value`` or ``key value``; a value glued to letters (``9x``) is no number.
_FIELD = re.compile(rf"(?P<key>[A-Za-z_][\w/.\-]*)(?:\s*[:=]\s*|\s+)(?P<value>{NUMBER})(?![\w.])")


@dataclass(frozen=True)
class StepLine:
    """One step line before a metric is chosen: its step, its numeric fields, and where it was."""

    step: int
    fields: dict[str, float]
    lineno: int


def step_lines(text: str) -> Iterator[StepLine]:
    """Every MaxText step print in ``text``, in order, repeats included.

    Example:
        >>> [(s.step, s.fields["loss"]) for s in step_lines("x\\n# completed step: 2, seconds: 1.5, loss 0.25\\n")]
        [(2, 0.25)]
    """
    for lineno, line in enumerate(text.splitlines(), start=1):
        if "completed step" not in line:
            continue
        matches = list(_STEP.finditer(line))
        for i, match in enumerate(matches):
            end = matches[i + 1].start() if i + 1 < len(matches) else len(line)
            yield StepLine(int(match.group(1)), parse_fields(line[match.end() : end]), lineno)


def parse_fields(rest: str) -> dict[str, float]:
    """The numeric ``key: value`` fields of the text after the step number; the first of a repeated key wins.

    Example:
        >>> parse_fields(", seconds: 0.3, TFLOP/s       : 12.5, lr: 1e-04, loss: nan [repeated 9x across cluster]")
        {'seconds': 0.3, 'TFLOP/s': 12.5, 'lr': 0.0001, 'loss': nan}
    """
    fields: dict[str, float] = {}
    for match in _FIELD.finditer(rest):
        fields.setdefault(match.group("key"), float(match.group("value")))
    return fields


def last_step_number(text: str) -> int | None:
    """The highest step number printed so far; a step number at the very end of ``text`` may still be growing
    (``completed step: 1`` of ``14`` being written), so it counts only once something follows it.

    Example:
        >>> last_step_number("completed step: 13, seconds: 1\\ncompleted step: 1")
        13
    """
    best: int | None = None
    for match in _STEP.finditer(text):
        if match.end() == len(text):
            continue
        step = int(match.group(1))
        if best is None or step > best:
            best = step
    return best
