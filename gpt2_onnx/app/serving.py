"""``gpt2-onnx serve`` on Ray Serve: a local Ray by default, an existing cluster by address.

Each replica is a Ray actor that loads the export once with the runtime's own loading (no torch), runs one
batching engine on it and answers HTTP through the OpenAI-compatible app (:mod:`gpt2_onnx.app.openai_api`);
Serve's proxy spreads requests over the replicas and restarts a replica that dies.

    client ──HTTP──> Serve proxy (host:port) ──> replica 1: FastAPI app → BatchEngine → ONNX Runtime session
                                             └─> replica N: …

Embedded (no address): Ray starts here with this machine's CPUs, no dashboard, a small object store (requests
and answers are small; nothing large goes through it) and its files in a temporary folder of its own, removed at
the end. With an address, the replicas go where the cluster's scheduler puts them; the export folder must be
readable at the same path there, and gpt2-onnx[serve] installed in the cluster's Python.
"""

from __future__ import annotations

import contextlib
import logging
import math
import shutil
import socket
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import ray
from ray import serve

from gpt2_onnx.app.loopback import bind_replica_grpc_to_node
from gpt2_onnx.app.openai_api import ApiSettings, create_app
from gpt2_onnx_core.errors import InvalidInputError, ServingError, first_line
from gpt2_onnx_core.integrity import IntegrityCheck
from gpt2_onnx_core.interrupts import handlers_kept, signals_deferred
from gpt2_onnx_core.layouts import KvCacheFormat, PromptKernel, kv_cache_format, prompt_kernel
from gpt2_onnx_core.providers import PROVIDER_NAMES, provider_name
from gpt2_onnx_core.serve_limits import MAX_BATCH_ROWS, MAX_BODY_BYTES, MAX_WAITING, REQUEST_TIMEOUT_S
from gpt2_onnx_runtimes.batching import BatchEngine, EngineOptions
from gpt2_onnx_runtimes.export_folder import ExportFolder
from gpt2_onnx_runtimes.prompt_kernel import check_prompt_kernel
from gpt2_onnx_runtimes.providers import ProviderName, ensure_provider_loadable
from gpt2_onnx_runtimes.runtime_options import RuntimeOptions

__all__ = [
    "APP_NAME",
    "BUILDER_ARGS",
    "Deployed",
    "EngineOptions",
    "ReplicaConfig",
    "ServeConfig",
    "app_builder",
    "check_here",
    "replica_runtime",
    "serve_until_stopped",
]

log = logging.getLogger(__name__)

APP_NAME = "gpt2-onnx"  # the Serve application (and deployment) name
NAMESPACE = "gpt2-onnx"
OBJECT_STORE_BYTES = 100 * 1024 * 1024  # embedded Ray: near Ray's minimum; only small messages pass through it
HEALTH_CHECK_PERIOD_S = 2.0  # a dead replica is noticed and replaced within a few seconds
HEALTH_CHECK_TIMEOUT_S = 10.0
SHUTDOWN_TIMEOUT_S = 5.0  # a stopping replica's requests get this long to finish
PROXY_TIMEOUT_MARGIN_S = 30.0  # the proxy's own end-to-end limit stays behind the app's timeout


@dataclass(frozen=True)
class ReplicaConfig:
    """What every replica is built from (sent to the cluster with the deployment)."""

    export: str  # the export folder, as a path each replica's node can read
    api: ApiSettings
    engine: EngineOptions = field(default_factory=EngineOptions)
    provider: ProviderName = "cpu"
    threads: int | None = None  # ONNX Runtime intra-op threads per replica; None: its default
    kv_cache: KvCacheFormat = "float32"  # the running batch's cache format (int8: a quarter of the memory)
    prompt_kernel: PromptKernel = "export"  # dynamic: an int8/int4 export's prompts through DynamicQuantizeMatMul
    # A lone row's tied head over a transposed copy of the table (RuntimeOptions.single_row_head); a replica also
    # runs larger batches, so it holds the copy besides the table (fp32: 154 MB for GPT-2); False: the table alone.
    single_row_head: bool = True
    # ONNX Runtime's intra-op threads spin while they wait for work (True) or sleep (False, the default): a
    # replica shares its cores with Serve's proxy, the HTTP handling and its batching loop's own Python, which
    # spinning threads take them from (:data:`SLEEPING_THREADS`).
    spinning: bool = False


# A replica's session config entry when its threads sleep. GPT-2-small under 16 clients on 2 cores (AMD EPYC, the
# server beside its own load generator; benchmarks/serve_options.py, results/*-serve-spinning-*) answered level to a
# few per cent more tokens/s with its threads sleeping: over 8 server starts each, fp32 1.036x and int4 1.012x
# (medians; higher in 5 of 8 each); with the prompt kernel 0.959x (1 of 3: within the rounds' spread). Sleeping
# threads also leave the cores alone between requests. ``gpt2-onnx run`` and the Python API keep
# ONNX Runtime's default (spinning): alone on the cores, a prompt's ~180 operators would each wake the threads
# (ort_sessions.session_options_for).
SLEEPING_THREADS = {"session.intra_op.allow_spinning": "0"}


@dataclass(frozen=True)
class ServeConfig:
    """What ``gpt2-onnx serve`` deploys, and where."""

    replica: ReplicaConfig
    host: str = "127.0.0.1"
    port: int = 8000
    replicas: int = 1
    max_replicas: int | None = None  # > replicas: Serve autoscales between the two on ongoing requests
    address: str | None = None  # None: a local Ray (embedded); else "auto" or "ray://HEAD:10001"
    cpus_per_replica: float = 1.0  # Ray CPUs reserved by each replica
    gpus_per_replica: float = 0.0
    local_cpus: int | None = None  # embedded: the CPUs the local Ray offers; None: Ray counts them
    log_level: int = logging.ERROR  # Ray's and Serve's own messages in this process (their files get the rest)

    @property
    def embedded(self) -> bool:
        return self.address is None


@serve.deployment(name=APP_NAME)
@serve.ingress()
class Gpt2OnnxReplica:
    """One replica: the export loaded once, its batching loop, and the HTTP app over it."""

    def __init__(self, config: ReplicaConfig) -> None:
        bind_replica_grpc_to_node()  # before Serve starts it, once this constructor returns
        runtime = replica_runtime(config, replica_threads(config))
        self._engine = BatchEngine.load(config.export, runtime, config.engine)
        self._engine.start()
        self._app = create_app(self._engine, config.api)

    def __serve_build_asgi_app__(self) -> Any:
        return self._app

    def check_health(self) -> None:
        """Serve's periodic probe: a replica whose batching loop stopped is replaced."""
        if not self._engine.alive:
            raise ServingError("the batching loop stopped")

    def __del__(self) -> None:
        self._engine.close()


def replica_runtime(config: ReplicaConfig, threads: int | None) -> RuntimeOptions:
    """A replica's session options: ``config``'s provider, cache format, prompt kernel and single-row head on
    ``threads`` intra-op threads, every other option at the runtime's default, as ``gpt2-onnx run`` and the Python
    API load an export (so that a request answered alone gets the same log-probabilities from all three, given the
    same options: tests/test_one_engine.py). Only the threads' waiting differs: they sleep unless
    ``config.spinning`` (:data:`SLEEPING_THREADS`), which changes no result."""
    return RuntimeOptions(
        provider=config.provider,
        intra_op_threads=threads,
        session_config={} if config.spinning else dict(SLEEPING_THREADS),
        kv_cache=config.kv_cache,
        prompt_kernel=config.prompt_kernel,
        single_row_head=config.single_row_head,
    )


def replica_threads(config: ReplicaConfig) -> int | None:
    """A replica's ONNX Runtime threads: as configured, else (on the CPU) the CPUs Ray reserved for it, so that
    ``gpt2-onnx serve`` and a Serve config file give a replica the same threads; None (CUDA): ONNX Runtime's."""
    if config.threads is not None or config.provider != "cpu":
        return config.threads
    cpus = ray.get_runtime_context().get_assigned_resources().get("CPU", 1.0)
    return max(1, math.floor(cpus))


def _replica_options(engine: EngineOptions) -> dict[str, Any]:
    """The deployment options that follow from one replica's limits (whoever sets the replicas' number)."""
    return {
        "max_ongoing_requests": engine.max_rows + engine.max_waiting,  # what one replica's engine holds
        "max_queued_requests": max(1, engine.max_waiting),  # then the proxy answers 503 at once
        "health_check_period_s": HEALTH_CHECK_PERIOD_S,
        "health_check_timeout_s": HEALTH_CHECK_TIMEOUT_S,
        "graceful_shutdown_timeout_s": SHUTDOWN_TIMEOUT_S,
        "graceful_shutdown_wait_loop_s": 0.5,
    }


def _deployment(config: ServeConfig) -> Any:
    engine = config.replica.engine
    options = _replica_options(engine)
    options["ray_actor_options"] = {"num_cpus": config.cpus_per_replica, "num_gpus": config.gpus_per_replica}
    if config.max_replicas is not None and config.max_replicas > config.replicas:
        options["autoscaling_config"] = {
            "min_replicas": config.replicas,
            "max_replicas": config.max_replicas,
            "target_ongoing_requests": engine.max_rows,  # a full batch per replica, then another replica
        }
    else:
        options["num_replicas"] = config.replicas
    # Ray's stubs type a @serve.deployment class as the class itself, without Deployment's .options(): third-party
    return cast("Any", Gpt2OnnxReplica).options(**options).bind(config.replica)


BUILDER_ARGS = {
    # Serve config / RayService ``args`` → what they set (the command's option of the same meaning)
    "export": "the export folder on the nodes (required)",
    "model_name": "the name clients pass [the folder's name]",
    "api_key": "require this Bearer key",
    "provider": f"{' or '.join(PROVIDER_NAMES)} [cpu]",
    "threads": "ONNX Runtime threads per replica [the CPUs Ray gives the replica]",
    "max_batch": f"rows decoded together [{MAX_BATCH_ROWS}]",
    "kv_cache": "float32 or int8 [float32]",
    "prompt_kernel": "export or dynamic [export]",
    "single_row_head": "true or false [true]",
    "spinning": "true or false [false]",
    "max_queue": f"requests waiting per replica [{MAX_WAITING}]",
    "timeout": f"seconds per request [{REQUEST_TIMEOUT_S:g}]",
    "max_body_bytes": f"[{MAX_BODY_BYTES}]",
}


def app_builder(args: dict[str, Any]) -> Any:
    """The application for a Serve config file or KubeRay's RayService (``import_path:
    gpt2_onnx.app.serving:app_builder``, ``args`` from :data:`BUILDER_ARGS`); the config's ``deployments`` entry
    sets the replicas, autoscaling and ``ray_actor_options``. Unknown or missing args are refused."""
    unknown = sorted(set(args) - set(BUILDER_ARGS))
    if unknown or "export" not in args:
        problem = f"unknown args {', '.join(unknown)}" if unknown else "args lack 'export'"
        raise InvalidInputError(f"{problem}; the args are {', '.join(BUILDER_ARGS)}")
    export = str(args["export"])
    engine = EngineOptions(
        max_rows=int(args.get("max_batch", MAX_BATCH_ROWS)), max_waiting=int(args.get("max_queue", MAX_WAITING))
    )
    api = ApiSettings(
        model_name=str(args.get("model_name") or Path(export).name),
        api_key=args.get("api_key") or None,
        max_body_bytes=int(args.get("max_body_bytes", MAX_BODY_BYTES)),
        timeout_s=float(args.get("timeout", REQUEST_TIMEOUT_S)),
    )
    threads = args.get("threads")
    provider = provider_name(str(args.get("provider", "cpu")))
    kv_cache = kv_cache_format(str(args.get("kv_cache", "float32")))
    kernel = prompt_kernel(str(args.get("prompt_kernel", "export")))
    head = _flag(args, "single_row_head", default=True)
    spinning = _flag(args, "spinning", default=False)
    replica = ReplicaConfig(
        export, api, engine, provider, None if threads is None else int(threads), kv_cache, kernel, head, spinning
    )
    return cast("Any", Gpt2OnnxReplica).options(**_replica_options(engine)).bind(replica)  # Ray's stubs, as above


def _flag(args: dict[str, Any], name: str, default: bool) -> bool:
    """A boolean builder arg: true or false (YAML's booleans, or those words), else an InvalidInputError."""
    value = args.get(name, default)
    if isinstance(value, bool):
        return value
    if str(value).lower() in ("true", "false"):
        return str(value).lower() == "true"
    raise InvalidInputError(f"args '{name}' must be true or false, got {value!r}")


def check_here(folder: Path, provider: ProviderName | None, kernel: PromptKernel = "export") -> ExportFolder:
    """The checks a replica's loading starts with, run here first on the folder opened as a replica opens it
    (:class:`ExportFolder`: manifest, ONNX Runtime version, files by presence and size, generation defaults; then
    its tokenizer, which serving needs) and, when given, the provider: a bad folder or an unusable provider is one
    line now rather than a failed deployment later (or replicas waiting forever for a GPU that is not there)."""
    if provider is not None:
        ensure_provider_loadable(provider)
    export = ExportFolder.open(folder, IntegrityCheck(sha256=False))  # each replica hashes its own copy
    _ = export.tokenizer  # read now: a folder without a usable one is refused here
    check_prompt_kernel(export.manifest, kernel)
    return export


def check_port_free(host: str, port: int) -> None:
    """Refuse a port something here already listens on (the embedded proxy would fail later, less clearly)."""
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
        try:
            probe.bind((host, port))
        except OSError as exc:
            raise ServingError(f"cannot listen on {host}:{port}: {exc.strerror or exc}; choose another --port") from exc


@contextlib.contextmanager
def _ray(config: ServeConfig) -> Iterator[None]:
    """Ray connected for the block: started here (embedded) or joined by address; stopped or left after."""
    temp = tempfile.mkdtemp(prefix="gpt2-onnx-ray-") if config.embedded else None
    try:
        with handlers_kept():  # Ray's own SIGTERM handlers would crash-dump and exit 15 instead of stopping
            _init(config, temp)
    except Exception as exc:  # Ray raises ConnectionError, RuntimeError, ValueError… for a bad address
        where = "a local Ray" if temp is not None else f"the Ray cluster at '{config.address}'"
        _remove(temp)
        raise ServingError(f"cannot start or reach {where}: {first_line(exc)}") from exc
    except KeyboardInterrupt:  # during Ray's start: what it started so far stops too
        _stop(temp)
        raise
    try:
        yield
    finally:
        _stop(temp)


def _stop(temp: str | None) -> None:
    """Disconnect from Ray (an embedded one stops) and remove its folder, with interrupts held until done."""
    with signals_deferred():
        ray.shutdown()
        _remove(temp)


def _init(config: ServeConfig, temp: str | None) -> None:
    """Start a local Ray with its files in ``temp`` (embedded), or join the cluster at the configured address."""
    if temp is None:
        ray.init(address=config.address, namespace=NAMESPACE, log_to_driver=False, logging_level=config.log_level)
        return
    ray.init(
        num_cpus=config.local_cpus,
        include_dashboard=False,
        object_store_memory=OBJECT_STORE_BYTES,
        _temp_dir=temp,
        namespace=NAMESPACE,
        log_to_driver=False,
        logging_level=config.log_level,
    )


def _remove(folder: str | None) -> None:
    if folder is not None:
        shutil.rmtree(folder, ignore_errors=True)


@dataclass(frozen=True)
class Deployed:
    """Where the API answers, and what the cluster did not take from the options."""

    url: str
    notes: tuple[str, ...] = ()


def _deploy(config: ServeConfig) -> Deployed:
    """Start Serve's proxies (unless the cluster runs them already) and the application."""
    timeout = config.replica.api.timeout_s + PROXY_TIMEOUT_MARGIN_S
    logging.getLogger("ray.serve").setLevel(config.log_level)
    quiet = {"log_level": "WARNING"}  # the replicas' and proxies' log files
    http = {"host": config.host, "port": config.port, "request_timeout_s": timeout}
    try:
        serve.start(http_options=http, logging_config=quiet)
        serve.run(_deployment(config), name=APP_NAME, route_prefix="/", logging_config=quiet)
    except Exception as exc:  # a replica that cannot load the export fails the deployment
        raise ServingError(f"the deployment failed: {_cause(exc)}") from exc
    host, port = _proxy_address(config)
    notes: tuple[str, ...] = ()
    if (host, port) != (config.host, config.port):  # Serve was running there already, with its own options
        notes = (
            f"Serve already ran on this cluster with its proxies on {host}:{port}; --host and --port do not apply",
        )
    return Deployed(f"http://{host}:{port}/v1", notes)


def _proxy_address(config: ServeConfig) -> tuple[str, int]:
    """The host and port Serve's proxies listen on (on a cluster, those of whoever started Serve first)."""
    from ray.serve.context import _get_global_client  # Serve's own client; no public call returns its options

    client = _get_global_client()
    if client is None:  # Serve's controller is gone: nothing answers anywhere
        raise ServingError("Serve stopped on the cluster while the application was deployed")
    return str(client.http_config.host), int(client.http_config.port)


def _cause(exc: BaseException) -> str:
    """Why the deployment failed, in one line: the last error line of the replicas' report (Serve keeps it in the
    deployment's status; the exception itself says only that the deployment failed)."""
    reports = [str(exc)]
    with contextlib.suppress(Exception):  # the status is a bonus; the exception stands without it
        application = serve.status().applications.get(APP_NAME)
        if application is not None:
            reports += [status.message for status in application.deployments.values()]
    lines = [line.strip() for text in reports for line in text.splitlines() if "Error" in line and ":" in line]
    return lines[-1] if lines else first_line(exc)


def _undeploy() -> None:
    """Remove the application, its replicas drained first (graceful_shutdown_timeout_s). Other applications on a
    cluster stay; an embedded Ray's own Serve actors end with it."""
    with signals_deferred():
        try:
            serve.delete(APP_NAME)
        except Exception as exc:  # the cluster went away meanwhile: nothing left to remove
            log.warning("could not remove the application: %s", first_line(exc))


def serve_until_stopped(config: ServeConfig, on_ready: Callable[[Deployed], None], detach: bool = False) -> None:
    """Deploy, call ``on_ready``, and serve until interrupted (Ctrl-C, SIGTERM); then remove what this call
    deployed. ``detach`` (a cluster only): return once deployed and leave the application running there."""
    if config.embedded:
        check_port_free(config.host, config.port)
    with _ray(config):
        deployed = False
        try:
            done = _deploy(config)
            deployed = True
            on_ready(done)
            if detach:
                return
            while True:
                time.sleep(1.0)
        finally:
            if not (deployed and detach):  # a failed deployment is removed too
                _undeploy()
