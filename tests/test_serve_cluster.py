"""``gpt2-onnx serve --address``: deploying onto a Ray cluster that already runs (one node started here with
``ray start --head``, on loopback), by its GCS address and through Ray Client, detached and attached; stopping
removes the application only, and the cluster goes on."""

from __future__ import annotations

import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx2
import psutil
import pytest

from benchmarks.serve_process import ServeProcess, clean_environment, free_port, serve_command
from gpt2_onnx_runtimes import GenerationOptions, Gpt2Onnx

pytestmark = pytest.mark.slow  # about a minute: a Ray head and three deployments; not among the CI tests

START_TIMEOUT_S = 120.0
# The head and the commands that join it: loopback only (see gpt2_onnx.cli.serve_cmd), and Ray's token
# authentication, which a driver given an explicit address turns on only when told, with this run's token: `ray start`
# finds none otherwise (unless an earlier Ray left one in ~/.ray/auth_token), and never writes one. gRPC's fork
# handlers off: Ray Client's proxy forks one server per client while its other threads are inside gRPC ("skipping
# fork() handlers"), and that server sometimes died before serving ("Starting Ray client server failed"; once in CI,
# 1 of 24 parallel connections here, and a gRPC "Check failed" in ev_epoll1_linux.cc); with them off, 36 of 36.
CLUSTER_ENV = {
    "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
    "RAY_AUTH_MODE": "token",
    "RAY_AUTH_TOKEN": secrets.token_hex(32),
    "GRPC_ENABLE_FORK_SUPPORT": "false",
}
BODY = {"model": "tiny", "prompt": "The meaning of life is", "max_tokens": 8, "temperature": 0}


@dataclass(frozen=True)
class Cluster:
    address: str  # the GCS address: what `--address` takes on a node of the cluster
    client: str  # Ray Client's address, ray://HOST:PORT
    proxy_port: int  # where Serve's proxy listens once the first deployment starts it
    temp: Path  # the head's --temp-dir: its session logs lie below it

    def explain(self, done: subprocess.CompletedProcess[str]) -> str:
        """A failed command's stderr and the tails of the head's Ray Client server logs: Ray Client's own errors
        ("Starting Ray client server failed. See ray_client_server_23000.err") name a file that the fixture removes
        at the end of the module, so a failure has to show it while it is there."""
        tails = [
            f"--- {log.name} (last 40 lines) ---\n" + "\n".join(log.read_text(errors="replace").splitlines()[-40:])
            for log in sorted((self.temp / "session_latest" / "logs").glob("ray_client_server*"))
            if log.is_file() and log.stat().st_size
        ]
        return "\n".join([done.stderr, *tails])


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    gcs, client = free_port(), free_port()
    temp = tempfile.mkdtemp(prefix="g2o-head-")  # short: Ray's socket paths live below it
    ray = Path(sys.executable).parent / "ray"
    command = [str(ray), "start", "--head", "--block", f"--temp-dir={temp}", "--num-cpus=2", f"--port={gcs}"]
    command += [f"--ray-client-server-port={client}", "--include-dashboard=false", "--node-ip-address=127.0.0.1"]
    command += ["--object-store-memory=100000000", "--disable-usage-stats"]
    with open(Path(temp) / "head.log", "wb") as log:
        head = subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, env={**clean_environment(), **CLUSTER_ENV},
            stdin=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while b"Ray runtime started" not in (Path(temp) / "head.log").read_bytes():
            assert head.poll() is None and time.monotonic() < deadline, (Path(temp) / "head.log").read_text()
            time.sleep(0.5)
        yield Cluster(f"127.0.0.1:{gcs}", f"ray://127.0.0.1:{client}", free_port(), Path(temp))
    finally:
        _stop_head(head)
        shutil.rmtree(temp, ignore_errors=True)


def _stop_head(head: subprocess.Popen[bytes]) -> None:
    """End the head and every process it started, by PID (never `ray stop`: it ends every Ray on the machine). A
    head that has already exited (it failed to start: the fixture's assertion shows its log) leaves nothing."""
    try:
        processes = [psutil.Process(head.pid), *psutil.Process(head.pid).children(recursive=True)]
    except psutil.NoSuchProcess:
        return
    head.send_signal(signal.SIGINT)
    _, alive = psutil.wait_procs(processes, timeout=10)
    for process in alive:
        process.terminate()
    _, alive = psutil.wait_procs(alive, timeout=10)
    for process in alive:
        process.kill()


def deploy(export: Path | str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*serve_command(export), *args], capture_output=True, text=True, timeout=300,
        env={**clean_environment(), **CLUSTER_ENV}, stdin=subprocess.DEVNULL,
    )  # fmt: skip


def complete(port: int) -> httpx2.Response:
    return httpx2.post(f"http://127.0.0.1:{port}/v1/completions", json=BODY, timeout=60)


def test_detached_deployments_stay_up(cluster: Cluster, tiny_export: Path) -> None:
    expected = Gpt2Onnx.load(tiny_export).generate(BODY["prompt"], GenerationOptions(max_new_tokens=8))[0].text
    port = str(cluster.proxy_port)
    done = deploy(tiny_export, "--address", cluster.client, "--port", port, "--replicas", "2", "--detach")
    assert done.returncode == 0, cluster.explain(done)
    assert f"at http://127.0.0.1:{port}/v1 (2 replica(s) on the Ray cluster at {cluster.client})" in done.stdout
    assert "Detached" in done.stdout and complete(cluster.proxy_port).json()["choices"][0]["text"] == expected
    again = deploy(tiny_export, "--address", cluster.address, "--port", str(free_port()), "--detach")
    assert again.returncode == 0, cluster.explain(again)
    assert f"proxies on 127.0.0.1:{port}; --host and --port do not apply" in again.stderr  # said, not ignored
    assert f"at http://127.0.0.1:{port}/v1" in again.stdout
    assert complete(cluster.proxy_port).json()["choices"][0]["text"] == expected


def test_an_attached_deployment_is_removed_by_ctrl_c(cluster: Cluster, tiny_export: Path, tmp_path: Path) -> None:
    server = ServeProcess(tiny_export, tmp_path, "--address", cluster.address, port=cluster.proxy_port, env=CLUSTER_ENV)
    server.start()
    assert complete(cluster.proxy_port).status_code == 200
    assert server.stop() == 0
    gone = httpx2.get(f"http://127.0.0.1:{cluster.proxy_port}/health", timeout=30)
    assert gone.status_code == 404, "the application is gone; Serve's proxy, the cluster's, still answers"


def test_a_folder_the_replicas_cannot_load_fails_the_deployment(cluster: Cluster, tmp_path: Path) -> None:
    done = deploy(tmp_path / "not-here", "--address", cluster.address, "--port", str(cluster.proxy_port))
    assert done.returncode == 1
    (error,) = [line for line in done.stderr.splitlines() if line.startswith("Error:")]
    assert "the deployment failed" in error and "not-here" in error, error
