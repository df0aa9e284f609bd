"""What a newcomer reads first agrees with what ships: the README's Use block starts with a space that runs on
this machine, and the demo's header comment names the params and profiles the demo has."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from flagopt.cli import build_parser
from flagopt.space import load_space

REPO = Path(__file__).resolve().parents[1]


def use_commands() -> list[list[str]]:
    text = (REPO / "README.md").read_text()
    block = text[text.index("## Use\n"):text.index("| topic | doc |")]
    out = []
    for code in re.findall(r"```bash\n(.*?)```", block, re.DOTALL):
        for line in code.splitlines():
            words = shlex.split(line, comments=True)
            if words[:3] == ["python", "-m", "flagopt"]:
                out.append(words[3:])
    return out


def test_the_use_block_starts_locally_and_every_command_parses():
    commands = use_commands()
    first_space = next(c[c.index("--space") + 1] for c in commands if "--space" in c)
    assert first_space == "search_spaces/demo.yaml"
    assert load_space(REPO / first_space).executor.kind == "local"
    parser = build_parser()
    for argv in commands:
        parser.parse_args(argv)  # exits (fails the test) on a verb or option the CLI does not have


def test_the_demo_comment_names_what_the_demo_has():
    path = REPO / "search_spaces" / "demo.yaml"
    header = "".join(line for line in path.read_text().splitlines(keepends=True) if line.startswith("#"))
    space = load_space(path)
    for name in [p.name for p in space.params] + [c.profile for c in space.profiles]:
        assert name in header, name
    assert "host device count" not in header and "microbatch" not in header  # knobs the demo does not have
    eigen = next(p for p in space.params if p.key == "xla_cpu_multi_thread_eigen")
    assert eigen.default is True  # XLA's default, stated so the screen does not re-probe it


def test_maxtext_spaces_say_where_the_compile_cache_goes():
    """MaxText writes a compile cache to ~/jax_cache unless told: the CPU space moves it, the catalog says so."""
    for path in sorted((REPO / "search_spaces").glob("*.yaml")):
        space = load_space(path)
        if not any(w in ("MaxText.train", "maxtext.trainers.pre_train.train") for w in space.command):
            continue
        assert "~/jax_cache" in path.read_text(), path.name
        if path.name == "maxtext_cpu.yaml":
            assert "jax_cache_dir=/tmp/maxtext-flagopt/jax_cache" in space.command
    assert "~/jax_cache" in (REPO / "docs" / "maxtext.md").read_text()


def test_maxtext_cpu_sets_the_tolerance_its_comment_and_docs_promise():
    """The space and docs/maxtext.md say the numerics guard flags batch-size changes: it needs a tolerance, and one
    below the +0.8 % loss change measured for batch 2 and 4 (docs/maxtext.md)."""
    space = load_space(REPO / "search_spaces" / "maxtext_cpu.yaml")
    assert space.numerics.tolerance is not None and 0 < space.numerics.tolerance < 0.008
