"""The docstrings' examples run: every module of the package, as `python -m pytest --doctest-modules flagopt` would.

An example that goes stale (a verdict that changed, a name no longer defined) fails here instead of misleading a
reader; examples that need a study, a server or a cluster carry ``+SKIP``.
"""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import flagopt

MODULES = sorted(m.name for m in pkgutil.walk_packages(flagopt.__path__, "flagopt.")
                 if not m.name.endswith("__main__"))


@pytest.mark.parametrize("name", MODULES)
def test_the_examples_of_the_docstrings_run(name: str) -> None:
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE, report=False)
    assert result.failed == 0, f"{name}: {result.failed} of {result.attempted} examples failed (run it with -v)"
