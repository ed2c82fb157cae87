"""The scripts a new user runs first: the demo (real weights when the Hub can be had, random weights offline, and
it says which) and the set-up (no setuptools advice box)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.test_cli_export import fake_hub_cache

REPO = Path(__file__).resolve().parent.parent


def demo(tmp_path: Path, **settings: str) -> subprocess.CompletedProcess[str]:
    """scripts/demo.sh with this test's environment (no set-up), the tiny model as fallback, offline."""
    env = {
        **os.environ,
        "SKIP_SETUP": "1",
        "VENV": sys.prefix,
        "OUT": str(tmp_path / "out"),
        "FALLBACK_MODEL": "random:tiny",
        "HF_HUB_OFFLINE": "1",
        "HF_HUB_CACHE": str(tmp_path / "empty-hub-cache"),
        **settings,
    }
    return subprocess.run(
        ["bash", str(REPO / "scripts" / "demo.sh")], capture_output=True, text=True, env=env, timeout=600, check=False
    )


def test_demo_offline_falls_back_to_random_weights_and_says_so(tmp_path: Path) -> None:
    done = demo(tmp_path)
    assert done.returncode == 0, done.stderr
    output = done.stdout + done.stderr
    assert "openai-community/gpt2 could not be exported" in output
    assert "exports random:tiny instead: random weights, which print nonsense" in output
    assert "for real text, export a checkpoint: gpt2-onnx export --model openai-community/gpt2" in output
    assert "Note: this export holds random weights (random:tiny, seed 0)" in done.stderr  # from run, by the text
    assert done.stdout.splitlines()[-1].startswith("The meaning of life is")


def test_demo_uses_the_hub_checkpoint_when_it_can_be_had(tiny_checkpoint: Path, tmp_path: Path) -> None:
    """Also the default suite's check that a hub id in the local cache exports offline (``gpt2-onnx export
    --model HUB_ID`` with HF_HUB_OFFLINE=1 and HF_HUB_CACHE, as test_cli_export's ``-m slow``
    test_cached_hub_id_exports_offline runs it alone): the export succeeds and its manifest names the hub id."""
    fake_hub_cache(tmp_path / "hub", "some-org/tiny-gpt2", tiny_checkpoint)
    done = demo(tmp_path, HUB_MODEL="some-org/tiny-gpt2", HF_HUB_CACHE=str(tmp_path / "hub"))
    assert done.returncode == 0, done.stderr
    assert "demo: exported some-org/tiny-gpt2 from the Hugging Face Hub" in done.stdout
    assert "random" not in done.stdout + done.stderr
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["model"]["source"] == "some-org/tiny-gpt2"


def _editable_install_warnings(tmp_path: Path) -> str:
    """Run scripts/setup.sh against a stand-in interpreter that records each call; the PYTHONWARNINGS value it
    gave the editable install."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    log = tmp_path / "calls.log"
    python = venv / "bin" / "python"
    python.write_text(f'#!/bin/sh\necho "$PYTHONWARNINGS|$*" >> "{log}"\n')
    (venv / "bin" / "gpt2-onnx").write_text("#!/bin/sh\necho gpt2-onnx, version test\n")
    for program in (python, venv / "bin" / "gpt2-onnx"):
        program.chmod(0o755)
    env = {**os.environ, "VENV": str(venv)}
    env.pop("PYTHONWARNINGS", None)
    done = subprocess.run(["bash", str(REPO / "scripts" / "setup.sh")], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    [editable] = [line for line in log.read_text().splitlines() if "install --quiet -e" in line]
    return editable.split("|", 1)[0]


def test_setup_keeps_setuptools_editable_install_box_off_the_terminal(tmp_path: Path) -> None:
    """pip re-raises the build backend's warnings in its own process; the filter setup.sh gives it drops this one
    (by its message: 'Editable installation.' then the 9-line box) and nothing else."""
    value = _editable_install_warnings(tmp_path)
    box = "Editable installation.\\n!!\\n\\n  ****\\n  Please be careful with folders in your working directory\\n!!"
    emit = f"import warnings; warnings.warn_explicit({box!r}, UserWarning, 'editable_wheel.py', 354)"
    other = "import warnings; warnings.warn('something else', UserWarning)"
    env = {**os.environ, "PYTHONWARNINGS": value}
    quiet = subprocess.run([sys.executable, "-c", emit], capture_output=True, text=True, env=env)
    assert quiet.returncode == 0 and quiet.stderr == ""
    loud = subprocess.run([sys.executable, "-c", emit], capture_output=True, text=True)
    assert "Editable installation." in loud.stderr  # the same warning without the filter
    kept = subprocess.run([sys.executable, "-c", other], capture_output=True, text=True, env=env)
    assert "something else" in kept.stderr
