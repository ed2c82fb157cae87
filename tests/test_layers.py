"""The import contract, read statically from every module (imports inside functions and ``TYPE_CHECKING`` blocks
count as much as those at the top). One package per layer, one folder per package:

    gpt2_onnx.cli ──► gpt2_onnx.app ──► gpt2_onnx_exporters (exporters/) ──┐
    (gpt2_onnx/)                   └──► gpt2_onnx_runtimes  (runtimes/)  ──┴──► gpt2_onnx_core (core/)

- the core imports neither adapter, nor the application layer, nor the CLI, nor torch or ONNX Runtime;
- the adapters import the core (and their own package) alone: never each other, the application layer or the CLI;
- gpt2_onnx_runtimes never imports torch, transformers or a server framework; only the application layer imports
  Ray, FastAPI and the like;
- the application layer is the only code that imports both adapters, and imports them at module top level;
- the CLI imports the core and the application layer, never an adapter directly;
- no module imports, through any chain of imports, itself (no circles, lazy imports included).
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
    "gpt2_onnx_core": ROOT / "core" / "gpt2_onnx_core",
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
    package, _, rest = module.partition(".")
    if package == "gpt2_onnx":  # the product's top: the application layer, and the CLI (with the package itself)
        return APP if rest == "app" or rest.startswith("app.") else CLI
    return {"gpt2_onnx_core": CORE, "gpt2_onnx_exporters": EXPORTERS, "gpt2_onnx_runtimes": RUNTIMES}.get(package)


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
        for name in names if target in PACKAGE_FOLDERS else [target]:
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


def test_every_import_follows_the_layers() -> None:
    broken = []
    for item in all_imports():
        source, target = layer_of(item.module), layer_of(item.target)
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
        if layer_of(item.module) == APP and layer_of(item.target) in (EXPORTERS, RUNTIMES) and not item.top_level
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
        ("gpt2_onnx_core.names", "gpt2_onnx_runtimes.session", False),
        ("gpt2_onnx_runtimes.api", "gpt2_onnx_exporters.source", False),
        ("gpt2_onnx.app.export", "gpt2_onnx_exporters.graphs", True),
        ("gpt2_onnx.cli.run_cmd", "gpt2_onnx_runtimes.api", False),
        ("gpt2_onnx.cli.run_cmd", "gpt2_onnx.app.generate", True),
        ("gpt2_onnx_core.bench_settings", "gpt2_onnx.app.bench.runner", False),
        ("gpt2_onnx.app.bench.report", "gpt2_onnx_core.bench_settings", True),
    ],
)
def test_the_rules_themselves(module: str, target: str, expected: bool) -> None:
    source, layer = layer_of(module), layer_of(target)
    assert source is not None and layer is not None
    assert (layer in ALLOWED[source]) is expected


def test_the_cli_loads_no_adapter_and_nothing_heavy_until_a_command_runs() -> None:
    """``gpt2-onnx --help`` stays quick: the CLI's module imports only light application modules (the output
    folder's rules, install hints), never an adapter, torch, ONNX Runtime or Ray."""
    heavy = {"ray", "fastapi", "torch", "onnxruntime", "onnx", "gpt2_onnx_exporters", "gpt2_onnx_runtimes"}
    code = f"import sys, gpt2_onnx.cli; loaded = {heavy!r} & set(sys.modules); assert not loaded, loaded"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_a_replica_loads_no_torch() -> None:
    code = "import sys, gpt2_onnx.app.serving; assert not {'torch', 'transformers'} & set(sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def _import_graph(by_folder: bool) -> dict[str, set[str]]:
    """Our modules (or the folders that hold them) and what each imports of ours, lazy imports included."""
    modules = {
        _module_name(package, folder, path): path
        for package, folder in PACKAGE_FOLDERS.items()
        for path in folder.rglob("*.py")
    }

    def node(module: str) -> str:
        if not by_folder:
            return module
        path = modules[module]
        return str(path.parent.relative_to(ROOT))

    graph: dict[str, set[str]] = {node(module): set() for module in modules}
    for item in all_imports():
        target = item.target
        while target and target not in modules:
            target = target.rpartition(".")[0]
        if target and node(target) != node(item.module):
            graph[node(item.module)].add(node(target))
    return graph


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One circle per strongly connected component of more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(name: str) -> None:
        index[name] = low[name] = len(index)
        stack.append(name)
        for target in sorted(graph[name]):
            if target not in index:
                visit(target)
                low[name] = min(low[name], low[target])
            elif target in stack:
                low[name] = min(low[name], index[target])
        if low[name] == index[name]:
            component = []
            while (member := stack.pop()) != name:
                component.append(member)
            if component:
                found.append(sorted([name, *component]))

    for name in sorted(graph):
        if name not in index:
            visit(name)
    return found


@pytest.mark.parametrize("by_folder", [False, True], ids=["modules", "folders"])
def test_no_import_circles(by_folder: bool) -> None:
    circles = _circles(_import_graph(by_folder))
    assert not circles, "\n".join(" ⇄ ".join(circle) for circle in circles)


def test_a_circle_is_found() -> None:
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
