"""Documents generated from measured results stay what their sources give: a new result, or a hand edit of the
generated file, fails here until the generator is run again."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import click

from benchmarks import performance_doc
from gpt2_onnx.cli import cli
from scripts.matrix_table import table

REPO = Path(__file__).resolve().parent.parent


def test_performance_doc_is_what_the_results_give() -> None:
    """docs/performance.md is benchmarks/performance_doc.py's rendering of benchmarks/results/."""
    assert performance_doc.TARGET.read_text(encoding="utf-8") == performance_doc.render(), (
        "docs/performance.md is stale: run python benchmarks/performance_doc.py"
    )


def test_performance_doc_shows_every_kind_of_result() -> None:
    text = performance_doc.TARGET.read_text(encoding="utf-8")
    for kind in performance_doc.KINDS:
        newest = performance_doc.newest(kind)
        if newest is not None:
            assert f"## {kind.title}" in text and newest.name in text


def test_compatibility_doc_holds_the_matrix_table() -> None:
    """docs/compatibility.md's measured table is scripts/matrix_table.py's rendering of the committed matrix JSON."""
    cells = json.loads((REPO / "docs" / "compatibility-matrix.json").read_text(encoding="utf-8"))
    rendered = table(cells).strip()
    assert rendered in (REPO / "docs" / "compatibility.md").read_text(encoding="utf-8"), (
        "docs/compatibility.md is stale: rerun python scripts/matrix_table.py docs/compatibility-matrix.json"
    )


def _command_lines(text: str) -> list[tuple[str, list[str]]]:
    """Each ``gpt2-onnx CMD ...`` or ``-m gpt2_onnx CMD ...`` in ``text`` (continued lines joined): the command
    and the long flags written after it."""
    found = []
    joined = text.replace("\\\n", " ")
    for match in re.finditer(r"(?:gpt2-onnx|-m gpt2_onnx)\s+(export|run|verify|bench|serve)\b([^\n|`#;]*)", joined):
        try:
            words = shlex.split(match.group(2), comments=False)
        except ValueError:
            words = match.group(2).split()
        flags = [re.match(r"--[a-z][a-z0-9-]*", word) for word in words]
        found.append((match.group(1), [flag.group(0) for flag in flags if flag is not None]))
    return found


def test_scripts_and_docs_use_only_flags_that_exist() -> None:
    """A renamed flag (``export --seed`` became ``--weights-seed``) must not linger in a script or a document."""
    files = [*REPO.glob("benchmarks/*.sh"), *REPO.glob("scripts/*.sh"), REPO / "README.md", *REPO.glob("docs/*.md")]
    files += [REPO / ".ci" / "run", *REPO.glob("clients/*/*.sh"), *REPO.glob("clients/*/README.md")]
    context = click.Context(cli)
    unknown, checked = [], 0
    for path in files:
        if not path.is_file():
            continue
        for name, flags in _command_lines(path.read_text(encoding="utf-8")):
            command = cli.get_command(context, name)
            assert command is not None
            known = {opt for param in command.params for opt in (*param.opts, *param.secondary_opts)} | {"--help"}
            unknown += [f"{path.relative_to(REPO)}: {name} {flag}" for flag in flags if flag not in known]
            checked += len(flags)
    assert not unknown, unknown
    assert checked > 50, "the scan found the commands it checks"
