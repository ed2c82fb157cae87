"""The ONNX Runtime matrix: each export variant against the onnxruntime releases applications pin.

Runs with the project's main environment, which exports with torch. Each release gets its own cached
virtual environment holding only onnxruntime, numpy, onnx and protobuf; there ``gpt2_onnx_runtimes.matrix_check`` loads
an export and checks its golden tokens without torch::

    python scripts/ort_matrix.py        # CI: the required releases, each variant's minimum and the one below
    python scripts/ort_matrix.py --all  # every release in RUNTIMES, and the minimum each variant measures

What each cell must show follows from the ``min_onnxruntime`` the export's manifest.json records:

- a release at or above it reproduces the golden tokens (``pass``);
- a release below it refuses the export with our one-line version error (``refused``), and, given a copy whose
  manifest minimum is lifted, really fails to load it or computes other tokens (``fails``). So the recorded
  minimum is confirmed from both sides.

Adding a variant is one line in VARIANTS (its ``gpt2-onnx export`` flags); adding a release is one line in
RUNTIMES. A variant's minimum is whatever its manifest records: the matrix checks it, it does not set it.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))  # this checkout's gpt2_onnx, not an installed copy

from typing import get_args  # noqa: E402

from gpt2_onnx.app.import_roots import import_roots  # noqa: E402  (needs REPO on sys.path first)
from gpt2_onnx_core.manifest import read_manifest  # noqa: E402
from gpt2_onnx_core.versions import version_tuple  # noqa: E402
from gpt2_onnx_runtimes.matrix_check import CellStatus  # noqa: E402

WORK = REPO / ".ci-cache" / "ort-matrix"  # exports (remade on every run) and, by default, the venvs
VENVS_ENV = "GPT2_ONNX_ORT_VENVS"  # where the venvs live when not in WORK: a folder that outlives clones
EXPORT_MODEL = ("--model", "random:tiny", "--weights-seed", "0")
STAMP = "gpt2-onnx-requirements.txt"  # the pins a cached venv was built from; other pins rebuild it
AS_EXPORTED, LIFTED = "as exported", "minimum lifted"
# What "fails" accepts: every verdict of gpt2_onnx_runtimes.matrix_check but a pass or our own refusal; "crash" (no
# verdict, this script's own status) never counts.
FAILED = tuple(status for status in get_args(CellStatus) if status not in ("pass", "refused"))

# Harness pins. onnxruntime < 1.19 was built against numpy 1.x and does not import under numpy 2 (its wheels
# do not say so); onnx 1.17 is the newest onnx that still takes numpy 1.x and protobuf 4.
_NUMPY1 = ("numpy==1.26.4", "onnx==1.17.0", "protobuf==4.25.8")
_NUMPY2 = ("numpy==2.4.6", "onnx==1.23.2", "protobuf==7.36.2")


@dataclass(frozen=True)
class RuntimeEnv:
    """One onnxruntime release and the harness packages its venv holds."""

    version: str
    harness: tuple[str, ...]

    @property
    def requirements(self) -> tuple[str, ...]:
        return (f"onnxruntime=={self.version}", *self.harness)


# Oldest first: 1.15.0 is the oldest release with Python 3.11 wheels. The x.y.0 of each minor where an opset's
# support begins is here, so every recorded minimum is a release the matrix runs.
RUNTIMES: tuple[RuntimeEnv, ...] = (
    RuntimeEnv("1.15.0", _NUMPY1),
    RuntimeEnv("1.15.1", _NUMPY1),
    RuntimeEnv("1.16.0", _NUMPY1),
    RuntimeEnv("1.16.3", _NUMPY1),
    RuntimeEnv("1.17.0", _NUMPY1),
    RuntimeEnv("1.17.3", _NUMPY1),
    RuntimeEnv("1.18.0", _NUMPY1),
    RuntimeEnv("1.18.1", _NUMPY1),
    RuntimeEnv("1.19.0", _NUMPY2),
    RuntimeEnv("1.19.2", _NUMPY2),
    RuntimeEnv("1.20.0", _NUMPY2),
    RuntimeEnv("1.20.1", _NUMPY2),
    RuntimeEnv("1.21.0", _NUMPY2),
    RuntimeEnv("1.21.1", _NUMPY2),
    RuntimeEnv("1.22.0", _NUMPY2),
    RuntimeEnv("1.22.1", _NUMPY2),
    RuntimeEnv("1.24.4", _NUMPY2),
    RuntimeEnv("1.26.0", _NUMPY2),
    RuntimeEnv("1.28.0", _NUMPY2),
    RuntimeEnv("1.30.0", _NUMPY2),
    RuntimeEnv("1.32.0", _NUMPY2),  # the newest release when this table was last updated
)
REQUIRED = ("1.16.3", "1.17.3", "1.18.1", "1.20.1", RUNTIMES[-1].version)  # issue 8: what applications pin


@dataclass(frozen=True)
class Variant:
    """An export to check: a name and its ``gpt2-onnx export`` flags (added to the tiny seeded model's)."""

    name: str
    flags: tuple[str, ...]


VARIANTS: tuple[Variant, ...] = (
    Variant("fp32-opset17", ("--opset", "17")),  # the default export
    Variant("fp32-opset18", ("--opset", "18")),
    Variant("fp32-opset19", ("--opset", "19")),
    Variant("fp32-opset20", ("--opset", "20")),
    Variant("fp32-opset21", ("--opset", "21")),
    Variant("fp32-opset17-simplify", ("--opset", "17", "--simplify")),  # onnxsim rewrites the graphs
    Variant("fp32-opset17-all-logits", ("--opset", "17", "--all-logits")),
    Variant("fp32-opset17-optimize", ("--opset", "17", "--optimize")),  # com.microsoft fusions
    Variant("fp16-opset17", ("--opset", "17", "--precision", "fp16")),
    Variant("int8-opset17", ("--opset", "17", "--precision", "int8")),  # 8-bit MatMulNBits
    Variant("int4-opset17", ("--opset", "17", "--precision", "int4")),  # 4-bit MatMulNBits
)


@dataclass(frozen=True)
class Cell:
    """One release's verdict on one export."""

    variant: str
    onnxruntime: str
    manifest: str  # AS_EXPORTED, or LIFTED: a copy whose manifest asks for no minimum
    status: str  # pass, mismatch, refused, load-error, run-error (gpt2_onnx_runtimes.matrix_check); crash: no verdict
    expected: str  # pass, refused, or fails (mismatch, load-error or run-error)
    detail: str
    seconds: float

    @property
    def ok(self) -> bool:
        return self.status in FAILED if self.expected == "fails" else self.status == self.expected

    def line(self, width: int = 160) -> str:
        verdict = "ok  " if self.ok else "FAIL"
        label = self.variant if self.manifest == AS_EXPORTED else f"{self.variant} ({LIFTED})"
        note = "" if self.status == self.expected else f" (expected {self.expected})"
        # ONNX Runtime's load errors put the reason last, after source locations and C++ signatures
        detail = self.detail
        if len(detail) > width:
            detail = f"{detail[:60]} … {detail[61 - width :]}"
        return f"{verdict} onnxruntime {self.onnxruntime:<7} {label:<40} {self.status}{note}: {detail}"


def runtime(version: str) -> RuntimeEnv:
    for env in RUNTIMES:
        if env.version == version:
            return env
    raise SystemExit(f"onnxruntime {version} has no row in RUNTIMES (scripts/ort_matrix.py); add one")


def venv_python(folder: Path) -> Path:
    return folder / "bin" / "python"  # POSIX only, like the lock below


def venv_folder(venvs: Path, version: str) -> Path:
    return venvs / f"onnxruntime-{version}"


@contextlib.contextmanager
def _exclusive(lock: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``lock``: checkouts sharing a venv folder never build one venv at once."""
    lock.parent.mkdir(parents=True, exist_ok=True)
    with lock.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)  # released when the file closes
        yield


def ensure_venv(env: RuntimeEnv, venvs: Path) -> Path:
    """The venv's python for ``env``: built on first use, reused while its pins and Python stay the same."""
    folder = venv_folder(venvs, env.version)
    with _exclusive(folder.with_name(folder.name + ".lock")):
        return _build_venv(env, folder)


def _build_venv(env: RuntimeEnv, folder: Path) -> Path:
    python, stamp = venv_python(folder), folder / STAMP
    wanted = "\n".join([f"# python {sys.version.split()[0]}", *env.requirements]) + "\n"
    if python.exists() and stamp.is_file() and stamp.read_text(encoding="utf-8") == wanted:
        return python
    shutil.rmtree(folder, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True)
    pip = [sys.executable, "-m", "pip", "--python", str(python), "install", "--disable-pip-version-check"]
    done = subprocess.run([*pip, "--no-input", *env.requirements], capture_output=True, text=True)
    if done.returncode != 0:  # pip's output only on failure: it is long and full of index warnings
        sys.stderr.write(done.stdout + done.stderr)
        raise SystemExit(f"cannot install {' '.join(env.requirements)} (pip exit {done.returncode})")
    stamp.write_text(wanted, encoding="utf-8")  # last: an interrupted build has no stamp and is rebuilt
    return python


def _child_env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join(import_roots()), "PYTHONNOUSERSITE": "1"}


def export_variant(variant: Variant, exports: Path) -> Path:
    """Export the tiny model with the variant's flags, in this (the main) environment."""
    folder = exports / variant.name
    flags = [*EXPORT_MODEL, "-o", str(folder), "--force", *variant.flags]
    command = [sys.executable, "-m", "gpt2_onnx", "export", *flags]
    done = subprocess.run(command, cwd=REPO, env=_child_env(), capture_output=True, text=True)
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        raise SystemExit(f"export of {variant.name} failed (exit {done.returncode}): {tail[0]}")
    return folder


def lifted_copy(folder: Path) -> Path:
    """A copy of an export whose manifest asks for no minimum: shows what an older release really does."""
    target = folder.with_name(folder.name + "-lifted")
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(folder, target)
    manifest = target / "manifest.json"
    data = json.loads(manifest.read_text(encoding="utf-8"))
    data["min_onnxruntime"] = "0"
    manifest.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    return target


def recorded_minimum(folder: Path) -> str:
    return read_manifest(folder).min_onnxruntime


def run_cell(python: Path, folder: Path, variant: str, version: str, manifest: str, expected: str) -> Cell:
    """Run ``gpt2_onnx_runtimes.matrix_check`` in a release's venv and turn its JSON line into a :class:`Cell`."""
    start = time.monotonic()
    command = [str(python), "-m", "gpt2_onnx_runtimes.matrix_check", str(folder)]
    done = subprocess.run(command, cwd=REPO, env=_child_env(), capture_output=True, text=True, timeout=600)
    seconds = time.monotonic() - start

    def cell(status: str, detail: str) -> Cell:
        return Cell(variant, version, manifest, status, expected, detail, seconds)

    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        return cell("crash", (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1])
    result = json.loads(lines[-1])
    if result["onnxruntime"] != version:
        return cell("crash", f"the venv imported onnxruntime {result['onnxruntime']}")
    return cell(result["status"], f"{result['detail']} [numpy {result['numpy']}, {seconds:.1f}s]")


def releases_to_run(minimum: str, everything: bool) -> list[str]:
    """Every release, or the required ones plus the recorded minimum and the release just below it."""
    if everything:
        return [env.version for env in RUNTIMES]
    chosen = {*REQUIRED, runtime(minimum).version}
    older = [env.version for env in RUNTIMES if version_tuple(env.version) < version_tuple(minimum)]
    chosen.update(older[-1:])
    return sorted(chosen, key=version_tuple)


def planned_cells(version: str, minimum: str) -> list[tuple[str, str]]:
    """(manifest, expected status) to run on ``version``: a pass from the minimum on, two proofs below it."""
    if version_tuple(version) >= version_tuple(minimum):
        return [(AS_EXPORTED, "pass")]
    return [(AS_EXPORTED, "refused"), (LIFTED, "fails")]


def measured_minimum(cells: Iterable[Cell]) -> str | None:
    """The oldest release from which every newer release passes (any manifest); None if the newest fails."""
    works: dict[str, bool] = {}
    for cell in cells:
        works[cell.onnxruntime] = works.get(cell.onnxruntime, False) or cell.status == "pass"
    minimum: str | None = None
    for version in sorted(works, key=version_tuple, reverse=True):
        if not works[version]:
            break
        minimum = version
    return minimum


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Check exports against pinned onnxruntime releases.")
    parser.add_argument("--all", action="store_true", help="every release in RUNTIMES; print measured minima")
    default_venvs = Path(os.environ.get(VENVS_ENV) or WORK / "venvs")
    parser.add_argument(
        "--venvs", type=Path, default=default_venvs, help=f"venv cache (${VENVS_ENV}, else {WORK.name}/venvs)"
    )
    parser.add_argument("--variants", default="", help="comma-separated variant names (default: all)")
    parser.add_argument("--jobs", type=int, default=2, help="exports run at once (venv builds: twice that)")
    parser.add_argument("--json", type=Path, default=None, help="also write every cell to this JSON file")
    return parser.parse_args(argv)


def _variants(names: str) -> list[Variant]:
    wanted = [name for name in names.split(",") if name]
    unknown = sorted(set(wanted) - {variant.name for variant in VARIANTS})
    if unknown:
        known = ", ".join(variant.name for variant in VARIANTS)
        raise SystemExit(f"unknown variant(s) {', '.join(unknown)}; known: {known}")
    return [variant for variant in VARIANTS if not wanted or variant.name in wanted]


def _run_variant(variant: Variant, folder: Path, pythons: dict[str, Path], everything: bool) -> list[Cell]:
    minimum = recorded_minimum(folder)
    folders = {AS_EXPORTED: folder}
    cells = []
    for version in releases_to_run(minimum, everything):
        for manifest, expected in planned_cells(version, minimum):
            if manifest not in folders:
                folders[manifest] = lifted_copy(folder)
            cell = run_cell(pythons[version], folders[manifest], variant.name, version, manifest, expected)
            print(cell.line(), flush=True)
            cells.append(cell)
    found = measured_minimum(cells)
    if everything or found != minimum:
        agree = "agrees with" if found == minimum else "DIFFERS from"
        print(f"     {variant.name}: measured minimum {found}, {agree} the recorded {minimum}", flush=True)
    return cells


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse(argv)
    variants = _variants(args.variants)
    exports = WORK / "exports"
    exports.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    with ThreadPoolExecutor(max(1, args.jobs)) as pool:
        folders = dict(zip(variants, pool.map(lambda v: export_variant(v, exports), variants), strict=True))
    print(f"exported {len(variants)} variant(s) in {time.monotonic() - start:.0f}s", flush=True)
    versions = {v for f in folders.values() for v in releases_to_run(recorded_minimum(f), args.all)}
    with ThreadPoolExecutor(max(1, 2 * args.jobs)) as pool:  # downloads and unpacking: more at once pays
        built = pool.map(lambda version: ensure_venv(runtime(version), args.venvs), versions)
        pythons = dict(zip(versions, built, strict=True))
    print(f"{len(pythons)} onnxruntime venv(s) ready after {time.monotonic() - start:.0f}s", flush=True)
    cells = [cell for variant, f in folders.items() for cell in _run_variant(variant, f, pythons, args.all)]
    if args.json is not None:
        args.json.write_text(json.dumps([asdict(cell) for cell in cells], indent=2) + "\n", encoding="utf-8")
    failed = sum(not cell.ok for cell in cells)
    print(f"ort-matrix took {time.monotonic() - start:.0f}s")
    print(f"ort-matrix: {len(cells) - failed} passed, {failed} failed")  # the closing line CI reads
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
