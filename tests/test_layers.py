"""The import contract, read statically from every module (imports inside functions and ``TYPE_CHECKING`` blocks
count as much as those at the top):

    gpt2_onnx.cli ──► gpt2_onnx.app ──► gpt2_onnx_exporters ──┐
                                  └──► gpt2_onnx_runtimes  ──┴──► gpt2_onnx (the core)

- the core imports neither adapter, nor the application layer, nor the CLI, nor torch or ONNX Runtime;
- the adapters import the core (and their own package) alone: never each other, the application layer or the CLI;
- gpt2_onnx_runtimes never imports torch, transformers or a server framework; only the application layer imports
  Ray, FastAPI and the like;
- the application layer is the only code that imports both adapters, and imports them at module top level;
- the CLI imports the core and the application layer, never an adapter directly.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE_FOLDERS = {
    "gpt2_onnx": ROOT / "gpt2_onnx",
    "gpt2_onnx_exporters": ROOT / "exporters" / "gpt2_onnx_exporters",
    "gpt2_onnx_runtimes": ROOT / "runtimes" / "gpt2_onnx_runtimes",
}
CORE, APP, CLI, EXPORTERS, RUNTIMES = "core", "app", "cli", "exporters", "runtimes"
OURS = {CORE, APP, CLI, EXPORTERS, RUNTIMES}
ALLOWED: dict[str, set[str]] = {
    CORE: {CORE},
    EXPORTERS: {CORE, EXPORTERS},
    RUNTIMES: {CORE, RUNTIMES},
    APP: {CORE, EXPORTERS, RUNTIMES, APP},
    CLI: {CORE, APP, CLI},
}
SERVING = {"ray", "fastapi", "starlette", "pydantic", "uvicorn", "openai"}  # the application layer's alone
# Third-party packages a layer must not import (the PyTorch side's and the server's stay out of the runtime side).
FORBIDDEN: dict[str, set[str]] = {
    CORE: {"torch", "transformers", "onnxruntime", "onnxscript", "onnxsim", *SERVING},
    RUNTIMES: {"torch", "transformers", "onnxscript", "onnxsim", "safetensors", *SERVING},
    EXPORTERS: {"onnxruntime", *SERVING},
    CLI: {"torch", "transformers", "onnxruntime", "onnxscript", *SERVING},
}


@dataclass(frozen=True)
class Import:
    module: str  # the importing module
    target: str  # what it imports (absolute)
    line: int
    top_level: bool  # at module level (TYPE_CHECKING blocks included), not inside a function


def layer_of(module: str) -> str | None:
    if module.startswith("gpt2_onnx_exporters"):
        return EXPORTERS
    if module.startswith("gpt2_onnx_runtimes"):
        return RUNTIMES
    if module == "gpt2_onnx.app" or module.startswith("gpt2_onnx.app."):
        return APP
    if module in ("gpt2_onnx.cli", "gpt2_onnx.__main__") or module.startswith("gpt2_onnx.cli."):
        return CLI
    if module == "gpt2_onnx" or module.startswith("gpt2_onnx."):
        return CORE
    return None


def _module_name(package: str, folder: Path, path: Path) -> str:
    parts = list(path.relative_to(folder).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join([package, *parts])


class _Collector(ast.NodeVisitor):
    def __init__(self, module: str, is_package: bool) -> None:
        self.module, self.is_package, self.depth = module, is_package, 0
        self.found: list[Import] = []

    def _visit_function(self, node: ast.AST) -> None:
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = _visit_function

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self.found.append(Import(self.module, alias.name, node.lineno, self.depth == 0))

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level:  # relative: resolve against this module's package
            base = self.module.split(".")
            base = base if self.is_package else base[:-1]
            base = base[: len(base) - node.level + 1]
            target = ".".join([*base, node.module] if node.module else base)
        else:
            target = node.module or ""
        names = [f"{target}.{alias.name}" for alias in node.names]
        # "from gpt2_onnx import app" imports the application layer: judge by the submodule when it is one of ours
        for name in names if target in PACKAGE_FOLDERS or target == "gpt2_onnx" else [target]:
            self.found.append(Import(self.module, name, node.lineno, self.depth == 0))


def all_imports() -> list[Import]:
    found: list[Import] = []
    for package, folder in PACKAGE_FOLDERS.items():
        for path in sorted(folder.rglob("*.py")):
            module = _module_name(package, folder, path)
            collector = _Collector(module, path.name == "__init__.py")
            collector.visit(ast.parse(path.read_text(encoding="utf-8"), filename=str(path)))
            found += collector.found
    return found


def _target_layer(target: str) -> str | None:
    layer = layer_of(target)
    if layer == CORE and target.count(".") == 1 and target.split(".")[1] in ("app", "cli"):
        return APP if target.endswith(".app") else CLI
    return layer


def test_every_import_follows_the_layers() -> None:
    broken = []
    for item in all_imports():
        source, target = layer_of(item.module), _target_layer(item.target)
        assert source is not None
        if target is not None and target not in ALLOWED[source]:
            broken.append(f"{item.module}:{item.line} ({source}) imports {item.target} ({target})")
        top = item.target.split(".")[0]
        if top in FORBIDDEN.get(source, set()):
            broken.append(f"{item.module}:{item.line} ({source}) imports {item.target}")
    assert not broken, "\n".join(broken)


def test_the_application_layer_imports_the_adapters_at_the_top() -> None:
    lazy = [
        f"{item.module}:{item.line} imports {item.target} inside a function"
        for item in all_imports()
        if layer_of(item.module) == APP and _target_layer(item.target) in (EXPORTERS, RUNTIMES) and not item.top_level
    ]
    assert not lazy, "\n".join(lazy)


def test_the_generic_folder_names_are_never_imported() -> None:
    """The repository's exporters/ and runtimes/ folders are not import names (PyPI has packages called so)."""
    found = [
        f"{item.module}:{item.line} imports {item.target}"
        for item in all_imports()
        if item.target.split(".")[0] in ("exporters", "runtimes")
    ]
    assert not found, "\n".join(found)


@pytest.mark.parametrize(
    ("module", "target", "expected"),
    [
        ("gpt2_onnx.names", "gpt2_onnx_runtimes.session", False),
        ("gpt2_onnx_runtimes.api", "gpt2_onnx_exporters.source", False),
        ("gpt2_onnx.app.export", "gpt2_onnx_exporters.graphs", True),
        ("gpt2_onnx.cli.run_cmd", "gpt2_onnx_runtimes.api", False),
        ("gpt2_onnx.cli.run_cmd", "gpt2_onnx.app.generate", True),
        ("gpt2_onnx.bench.report", "gpt2_onnx.app.bench_runner", False),
    ],
)
def test_the_rules_themselves(module: str, target: str, expected: bool) -> None:
    source, layer = layer_of(module), _target_layer(target)
    assert source is not None and layer is not None
    assert (layer in ALLOWED[source]) is expected


def test_the_cli_loads_neither_the_application_layer_nor_ray_until_a_command_runs() -> None:
    code = "import sys, gpt2_onnx.cli; assert not {'ray', 'fastapi', 'gpt2_onnx.app'} & set(sys.modules), sys.modules"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_a_replica_loads_no_torch() -> None:
    code = "import sys, gpt2_onnx.app.serving; assert not {'torch', 'transformers'} & set(sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
