"""Run MaxText's own config loader on key=value overrides, without training: JSON cases in, JSON verdicts out.

Started with the MaxText venv's interpreter (Python 3.12) by tests/maxtext/test_catalog_config.py, never imported by
flagopt's tests themselves. ``pyconfig.initialize`` is what the trainer calls first: it loads the YAML, applies the
model's config, checks every key against MaxText's pydantic model and validates the values (~0.2 s a case).

    stdin:  {"cases": [{"label": "baseline", "argv": ["src/maxtext/configs/base.yml", "steps=15", ...]}, ...]}
    stdout: a line "FLAGOPT_CASES <json>", the json a list of {"label", "ok", "error"}
"""

from __future__ import annotations

import json
import sys
import unittest  # noqa: F401  pyconfig re-raises its error under a test framework instead of sys.exit(2)

from maxtext.configs import pyconfig
from maxtext.utils import max_utils

# The config is all that is checked here: no jax.distributed (hardware=gpu would try to reach a coordinator).
max_utils.maybe_initialize_jax_distributed_system = lambda raw_keys: None


def check(argv: list[str]) -> dict[str, object]:
    try:
        pyconfig.initialize(["train", *argv], log_config=False)
    except Exception as exc:  # noqa: BLE001  every rejection is the answer, whatever its type
        return {"ok": False, "error": f"{type(exc).__name__}: {str(exc)[:600]}"}
    return {"ok": True, "error": ""}


def main() -> None:
    cases = json.load(sys.stdin)["cases"]
    results = [{"label": case["label"], **check(case["argv"])} for case in cases]
    print("FLAGOPT_CASES " + json.dumps(results), flush=True)


if __name__ == "__main__":
    main()
