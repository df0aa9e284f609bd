"""The import rule of docs/architecture.md, checked on the source by an AST walk.

1. A package imports only packages of a lower layer (``LAYERS``), never a higher one nor one of its own layer.
2. No module imports another package's private (``_underscore``) module or name: packages talk through their faces.
3. ``flagopt.study`` imports nothing of ``dashboard``, ``report``, ``export`` or ``cli`` (implied by 1; said
   separately because it is the rule that keeps the driver testable on its own).

Imports inside functions count the same as top-level ones: a lazy import is still a dependency.
"""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

#: Layer of every top-level module or package of flagopt; a package may import only lower layers.
LAYERS: dict[str, int] = {
    "__init__": 0, "errors": 0, "failure_classes": 0,
    "space": 1,
    "render": 2,
    "flags": 3,
    "executors": 4, "logs": 4, "failures": 4, "stats": 4, "evidence": 4, "workloads": 4,
    "decide": 5,
    "study": 6,
    "export": 7, "ab": 7,
    "report": 8,
    "dashboard": 9,
    "cli": 10,
    "__main__": 11,
}
ABOVE_STUDY = ("dashboard", "report", "export", "cli")
ROOT = Path(__file__).resolve().parents[1] / "flagopt"


def _imported(node: ast.AST, module_parts: tuple[str, ...], is_package: bool) -> list[str]:
    """Dotted names an import statement brings in: ``from flagopt.study import _arms`` is ``flagopt.study._arms``."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if not isinstance(node, ast.ImportFrom):
        return []
    stem = node.module or ""
    if node.level:
        package = module_parts if is_package else module_parts[:-1]
        stem = ".".join([*package[: len(package) - (node.level - 1)], *([stem] if stem else [])])
    return [f"{stem}.{a.name}" for a in node.names]


def violations(root: Path = ROOT) -> list[str]:
    """Every import under ``root`` (a ``flagopt`` folder) that breaks the rule, as ``file: what``."""
    out = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        is_package = rel.name == "__init__.py"
        module_parts = ("flagopt", *rel.with_suffix("").parts[:-1]) if is_package else ("flagopt", *rel.with_suffix("").parts)
        own = rel.parts[0] if len(rel.parts) > 1 else rel.stem
        where = f"flagopt/{rel.as_posix()}"
        if own not in LAYERS:
            out.append(f"{where}: package {own!r} has no layer in LAYERS")
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            for name in _imported(node, module_parts, is_package):
                parts = name.split(".")
                if parts[0] != "flagopt" or len(parts) < 2:
                    continue
                target = parts[1]
                if target == own or target == "__version__":
                    continue
                if target not in LAYERS:
                    out.append(f"{where}: imports {name}, which has no layer")
                elif LAYERS[target] >= LAYERS[own]:
                    out.append(f"{where}: {own} (layer {LAYERS[own]}) imports {name} (layer {LAYERS[target]})")
                if len(parts) >= 3 and parts[2].startswith("_") and not parts[2].startswith("__"):
                    out.append(f"{where}: imports another package's private module {'.'.join(parts[:3])}")
                if own == "study" and target in ABOVE_STUDY:
                    out.append(f"{where}: the study layer imports {name}")
    return out


def test_flagopt_keeps_the_import_rule() -> None:
    assert violations() == []


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "flagopt"
    for name, text in {"__init__.py": "", **files}.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


def test_the_checker_reports_each_kind_of_violation(tmp_path: Path) -> None:
    root = _tree(tmp_path, {
        "space/__init__.py": "from flagopt.space._model import Space\n",  # its own private module: fine
        "space/_model.py": "def load():\n    from flagopt.study import history\n",  # upward, even when lazy
        "study/__init__.py": "",
        "study/_driver.py": "from flagopt import dashboard\nfrom flagopt.executors import BaseExecutor\n",
        "report/__init__.py": "from flagopt.study._records import RunRecord\nfrom flagopt.study import _arms\n",
        "logs/__init__.py": "import flagopt.stats\n",  # a sibling of the same layer
        "plugins/__init__.py": "",  # a package nobody placed in a layer
    })
    found = violations(root)
    assert "flagopt/space/_model.py: space (layer 1) imports flagopt.study.history (layer 6)" in found
    assert "flagopt/study/_driver.py: study (layer 6) imports flagopt.dashboard (layer 9)" in found
    assert "flagopt/study/_driver.py: the study layer imports flagopt.dashboard" in found
    assert "flagopt/report/__init__.py: imports another package's private module flagopt.study._records" in found
    assert "flagopt/report/__init__.py: imports another package's private module flagopt.study._arms" in found
    assert "flagopt/logs/__init__.py: logs (layer 4) imports flagopt.stats (layer 4)" in found
    assert "flagopt/plugins/__init__.py: package 'plugins' has no layer in LAYERS" in found
    assert len(found) == 7  # the import of the executors face from study and space's own private module are fine


def test_relative_imports_are_resolved(tmp_path: Path) -> None:
    root = _tree(tmp_path, {
        "stats/__init__.py": "from ._noise import x\n",
        "stats/_noise.py": "from ..study import _arms\nfrom .. import report\n",
    })
    assert violations(root) == [
        "flagopt/stats/_noise.py: stats (layer 4) imports flagopt.study._arms (layer 6)",
        "flagopt/stats/_noise.py: imports another package's private module flagopt.study._arms",
        "flagopt/stats/_noise.py: stats (layer 4) imports flagopt.report (layer 8)",
    ]
