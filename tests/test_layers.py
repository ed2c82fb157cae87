"""The layers' import rules, read from the sources: the runtime never imports torch, Ray or a web framework; only
the application layer (gpt2_onnx/app) imports Ray and FastAPI; the CLI imports the application layer lazily."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SERVING = {"ray", "fastapi", "starlette", "pydantic", "uvicorn", "openai"}
PYTORCH = {"torch", "transformers"}


def imported(path: Path, top_level_only: bool = False) -> set[str]:
    """The top-level names of the modules ``path`` imports (anywhere, or at module level only)."""
    tree = ast.parse(path.read_text(), str(path))
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    names = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def sources(folder: str) -> list[Path]:
    return sorted((REPO / folder).rglob("*.py"))


def test_runtimes_import_neither_torch_nor_serving_libraries() -> None:
    found = {path.name: imported(path) & (SERVING | PYTORCH) for path in sources("runtimes")}
    assert {name: names for name, names in found.items() if names} == {}


def test_only_the_application_layer_imports_ray_and_fastapi() -> None:
    outside = [p for p in sources("gpt2_onnx") if "app" not in p.relative_to(REPO / "gpt2_onnx").parts[:1]]
    found = {str(p.relative_to(REPO)): imported(p) & SERVING for p in outside + sources("exporters")}
    assert {name: names for name, names in found.items() if names} == {}


def test_the_cli_imports_the_application_layer_lazily() -> None:
    found = imported(REPO / "gpt2_onnx" / "cli" / "serve_cmd.py", top_level_only=True)
    assert "ray" not in found
    code = "import sys, gpt2_onnx.cli; assert not {'ray', 'fastapi', 'gpt2_onnx.app'} & set(sys.modules), sys.modules"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_a_replica_loads_no_torch() -> None:
    code = "import sys, gpt2_onnx.app.serving; assert not {'torch', 'transformers'} & set(sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
