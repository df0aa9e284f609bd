"""`key=value` arguments of the reference LM workload, parsed and checked without importing JAX.

The workload takes MaxText-style arguments because flagopt appends tuned workload settings to the
command as ``key=value`` (for example ``num_pipeline_microbatches=16``); a later repeat of a key wins,
like a later XLA flag does.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from flagopt.errors import FlagoptError

SOURCE = "flagopt.workloads.lm"
MODES = ("fsdp", "tp", "pp")
DTYPES = ("bf16", "f32")
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


@dataclass(frozen=True)
class LMConfig:
    """One run of the reference workload; the defaults are sized for a few-core CPU.

    ``d_ff`` 0 means ``4 * d_model``; ``stages`` 0 means one stage per device.

    Example:
        >>> parse_args(["mode=tp", "layers=2"]).layers
        2
    """

    mode: str = "fsdp"
    layers: int = 8
    d_model: int = 128
    d_ff: int = 0
    heads: int = 8
    seq: int = 64
    batch: int = 8
    vocab: int = 256
    steps: int = 15
    dtype: str = "bf16"
    num_pipeline_microbatches: int = 4
    stages: int = 0
    host_devices: int = 8
    seed: int = 0
    lr: float = 0.3
    remat: bool = True

    @property
    def ff(self) -> int:
        """The MLP hidden size: ``d_ff`` or ``4 * d_model``."""
        return self.d_ff or 4 * self.d_model


_MINIMUM = {"layers": 1, "d_model": 1, "heads": 1, "seq": 2, "batch": 1, "vocab": 2, "steps": 1,
            "num_pipeline_microbatches": 1, "host_devices": 1, "d_ff": 0, "stages": 0, "seed": 0}


def _convert(key: str, text: str, default: Any) -> Any:
    if isinstance(default, bool):
        low = text.lower()
        if low in _TRUE or low in _FALSE:
            return low in _TRUE
        raise FlagoptError(SOURCE, key, f"expected a boolean (true/false), got {text!r}")
    if isinstance(default, int):
        try:
            value = int(text)
        except ValueError:
            raise FlagoptError(SOURCE, key, f"expected an integer, got {text!r}") from None
        if value < _MINIMUM[key]:
            raise FlagoptError(SOURCE, key, f"must be >= {_MINIMUM[key]}, got {value}")
        return value
    if isinstance(default, float):
        try:
            value = float(text)
        except ValueError:
            raise FlagoptError(SOURCE, key, f"expected a number, got {text!r}") from None
        if not value > 0 or value == float("inf"):
            raise FlagoptError(SOURCE, key, f"must be a finite number > 0, got {text!r}")
        return value
    choices = {"mode": MODES, "dtype": DTYPES}[key]
    if text not in choices:
        raise FlagoptError(SOURCE, key, f"must be one of {', '.join(choices)}, got {text!r}")
    return text


def parse_args(argv: list[str]) -> LMConfig:
    """Parse ``key=value`` words into an :class:`LMConfig`; a later repeat of a key wins.

    Raises:
        FlagoptError: an argument is not ``key=value``, names an unknown key, or has a bad value.
    """
    defaults = LMConfig()
    known = {f.name: getattr(defaults, f.name) for f in dataclasses.fields(LMConfig)}
    values: dict[str, Any] = {}
    for word in argv:
        key, sep, text = word.partition("=")
        key = key.strip().lstrip("-")
        if not sep or not key:
            raise FlagoptError(SOURCE, word, "expected key=value")
        if key not in known:
            raise FlagoptError(SOURCE, key, f"unknown key; known keys: {', '.join(known)}")
        values[key] = _convert(key, text.strip(), known[key])
    config = dataclasses.replace(defaults, **values)
    if config.d_model % config.heads:
        raise FlagoptError(SOURCE, "heads", f"must divide d_model={config.d_model}, got {config.heads}")
    return config


def check_layout(config: LMConfig, num_devices: int) -> None:
    """Check that the sizes split evenly over ``num_devices`` in the chosen mode.

    Raises:
        FlagoptError: naming the key to change.
    """
    n = num_devices

    def need(key: str, value: int, divisor: int, what: str) -> None:
        if value % divisor:
            raise FlagoptError(SOURCE, key, f"{key}={value} must be a multiple of {what} ({divisor})")

    if config.mode == "fsdp":
        need("batch", config.batch, n, "the number of devices")
        need("d_model", config.d_model, n, "the number of devices")
    elif config.mode == "tp":
        need("heads", config.heads, n, "the number of devices")
        need("d_ff", config.ff, n, "the number of devices")
    else:
        stages = config.stages or n
        need("stages", stages, n, "the number of devices")
        need("layers", config.layers, stages, "stages")
        microbatches = config.num_pipeline_microbatches
        need("batch", config.batch, microbatches, "num_pipeline_microbatches")
        if stages > n:
            need("num_pipeline_microbatches", microbatches, n,
                 "the number of devices when stages > devices (circular pipeline)")
