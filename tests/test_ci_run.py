""".ci/run skips a part whose toolchain is missing with one line each, and passes when nothing is present."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def test_ci_run_skips_each_missing_toolchain_with_one_line(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"  # bash and the few tools the script itself needs, no python3/cmake/dotnet/node
    bin_dir.mkdir()
    for tool in ("bash", "dirname", "mktemp", "timeout", "cat"):
        found = shutil.which(tool)
        assert found is not None
        (bin_dir / tool).symlink_to(found)
    env = {"PATH": str(bin_dir), "HOME": str(tmp_path)}
    done = subprocess.run(
        [str(bin_dir / "bash"), str(REPO / ".ci" / "run")],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    skipped = [line for line in done.stdout.splitlines() if line.startswith(".ci/run: skipping")]
    assert len(skipped) == 4, done.stdout
    assert "PyPI packages cannot be installed here" in skipped[0]
    assert "cmake or g++ not found" in skipped[1]
    assert "dotnet not found" in skipped[2]
    assert "node or npm not found" in skipped[3]
