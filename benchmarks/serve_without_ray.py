"""``gpt2-onnx serve``'s app without Ray Serve: one process, uvicorn in front of the same FastAPI app and batching
engine a replica builds (:func:`gpt2_onnx.app.serving.replica_runtime`: 2 threads, sleeping), so that
``benchmarks/serve_options.py`` can put Serve's share of a served round (its proxy's hop, the replica actor) beside
the rest of the HTTP path. A benchmark's yardstick, not a way to serve: no Serve config, no replicas, no health
probes; the product's server is ``gpt2-onnx serve``.

    python benchmarks/serve_without_ray.py EXPORT --port PORT [--threads 2]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO / folder) for folder in ("", "core", "runtimes")]  # this checkout's packages

from benchmarks.serve_process import READY_LINE, ServeProcess  # noqa: E402  # after the path

OPTION = "@without-ray"  # serve_options' variant options that start this instead of gpt2-onnx serve


class AppWithoutRay(ServeProcess):
    """This module as a child process, started, checked and stopped as :class:`ServeProcess` does ``serve``."""

    def __init__(self, export: Path | str, logs: Path, threads: int = 2) -> None:
        super().__init__(export, logs)
        self._command = [sys.executable, __file__, str(export), "--port", str(self.port), "--threads", str(threads)]


def main() -> None:
    import uvicorn

    from gpt2_onnx.app.openai_api import ApiSettings, create_app
    from gpt2_onnx.app.serving import ReplicaConfig, replica_runtime
    from gpt2_onnx_runtimes.batching import BatchEngine

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("export", type=Path)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    config = ReplicaConfig(str(args.export), ApiSettings(model_name="bench"))
    engine = BatchEngine.load(config.export, replica_runtime(config, args.threads), config.engine)
    engine.start()
    try:
        print(READY_LINE, flush=True)  # ServeProcess waits for it and for /health
        uvicorn.run(create_app(engine, config.api), host="127.0.0.1", port=args.port, log_level="warning")
    finally:
        engine.close()


if __name__ == "__main__":
    main()
