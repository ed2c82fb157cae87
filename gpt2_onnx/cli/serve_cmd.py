"""``gpt2-onnx serve``: an OpenAI-compatible completions API over an export folder, on Ray Serve.

The application layer (Ray, FastAPI) is imported only when the command runs, so the rest of the CLI works
without the ``serve`` extra. The API key may come from GPT2_ONNX_API_KEY: read here, by click, and nowhere else.
"""

from __future__ import annotations

import logging
import os
import secrets
from pathlib import Path
from typing import TYPE_CHECKING

import click

from gpt2_onnx.cli.options import (
    VERBOSE_KEY,
    kv_cache_option,
    prompt_kernel_option,
    provider_option,
    single_row_head_option,
    verbose_option,
)
from gpt2_onnx_core.errors import InvalidInputError, MissingDependencyError
from gpt2_onnx_core.interrupts import ignore_interrupts
from gpt2_onnx_core.layouts import KvCacheFormat, PromptKernel
from gpt2_onnx_core.providers import ProviderName
from gpt2_onnx_core.serve_limits import MAX_BATCH_ROWS, MAX_BODY_BYTES, MAX_WAITING, REQUEST_TIMEOUT_S

if TYPE_CHECKING:
    from gpt2_onnx.app.serving import Deployed, ReplicaConfig, ServeConfig

__all__ = ["serve"]

API_KEY_VARIABLE = "GPT2_ONNX_API_KEY"
# Ray's switch to single-machine mode (named for Windows and macOS, where it is the default): the node's address
# becomes 127.0.0.1, so the embedded Ray's own services (GCS, raylet, workers) listen and talk on loopback only.
RAY_SINGLE_MACHINE = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"
# A new local Ray turns token authentication on and, without a token, writes one to ~/.ray/auth_token with the
# umask's mode (0644: readable by every user). The embedded Ray gets a fresh token in its environment instead
# (inherited by its own processes only; /proc/PID/environ is its owner's), so no credential file is written.
RAY_AUTH_VARIABLES = ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH")
EXTRA_HINT = "gpt2-onnx serve needs the serve extra: pip install 'gpt2-onnx[serve]'"
CLUSTER_CPUS_PER_REPLICA = 1.0  # on a cluster, whose nodes differ: Ray CPUs per replica unless told
CUDA_GPUS_PER_REPLICA = 1.0  # with --provider cuda: GPUs per replica unless told


def _check_options(
    address: str | None,
    detach: bool,
    replicas: int,
    max_replicas: int | None,
    provider: ProviderName,
    gpus_per_replica: float | None,
    kv_cache: KvCacheFormat = "float32",
    prompt_kernel: PromptKernel = "export",
) -> None:
    """Refuse combinations that would otherwise be ignored or fail in every replica."""
    if kv_cache != "float32" and provider != "cpu":
        raise InvalidInputError(f"--kv-cache {kv_cache} runs on the CPU provider only, not {provider}")
    if prompt_kernel != "export" and provider != "cpu":
        raise InvalidInputError(f"--prompt-kernel {prompt_kernel} runs on the CPU provider only, not {provider}")
    if detach and address is None:
        raise InvalidInputError("--detach needs --address: an embedded Ray ends with this command")
    if max_replicas is not None and max_replicas < replicas:
        raise InvalidInputError(f"--max-replicas ({max_replicas}) must be at least --replicas ({replicas})")
    if gpus_per_replica and provider != "cuda":
        raise InvalidInputError("--gpus-per-replica needs --provider cuda")


def _cpus_per_replica(given: float | None, address: str | None, replicas: int, max_replicas: int | None) -> float:
    if given is not None:
        return given
    if address is not None:
        return CLUSTER_CPUS_PER_REPLICA
    return max(0.5, (os.cpu_count() or 1) / max(replicas, max_replicas or 0))  # embedded: this machine, shared


@click.command()
@verbose_option
@click.argument("export", type=click.Path(path_type=Path))
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on (loopback by default).")
@click.option("--port", type=click.IntRange(1, 65535), default=8000, show_default=True)
@click.option("--replicas", type=click.IntRange(min=1), default=1, show_default=True, help="Copies of the model.")
@click.option(
    "--max-replicas",
    type=click.IntRange(min=1),
    default=None,
    help="Autoscale between --replicas and this many replicas on the requests in progress.",
)
@click.option(
    "--address",
    default=None,
    help="Deploy on an existing Ray cluster ('auto', or ray://HEAD:10001); without it a local Ray starts here.",
)
@click.option("--detach", is_flag=True, help="With --address: deploy, then exit, leaving the API running there.")
@click.option(
    "--api-key",
    envvar=API_KEY_VARIABLE,
    show_envvar=True,
    default=None,
    help="Require 'Authorization: Bearer KEY' on every request (the health route excepted).",
)
@click.option("--model-name", default=None, help="The model name clients pass [default: the export folder's name].")
@provider_option("ONNX Runtime execution provider of every replica; never silently replaced by another.")
@click.option(
    "--threads",
    type=click.IntRange(min=1),
    default=None,
    help="Intra-op threads of each replica's ONNX Runtime session [the replica's CPUs].",
)
@click.option(
    "--cpus-per-replica",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help=f"Ray CPUs reserved by each replica [this machine's cores / replicas; {CLUSTER_CPUS_PER_REPLICA:g} on a "
    "cluster].",
)
@click.option(
    "--gpus-per-replica",
    type=click.FloatRange(min=0),
    default=None,
    help=f"With --provider cuda [{CUDA_GPUS_PER_REPLICA:g}].",
)
@click.option(
    "--max-batch", type=click.IntRange(min=1), default=MAX_BATCH_ROWS, show_default=True, help="Rows decoded together."
)
@kv_cache_option(
    "The running batch's KV cache: float32 (exact) or int8 (a quarter of the memory, scales measured on the "
    "export as each replica loads; CPU only; its perplexity change is in docs/performance.md)."
)
@prompt_kernel_option()
@single_row_head_option()
@click.option(
    "--spinning/--no-spinning",
    default=False,  # ReplicaConfig.spinning's (the CLI imports no runtime until a command runs)
    show_default=True,
    help="Whether each replica's ONNX Runtime threads spin while they wait for work instead of sleeping. A "
    "replica shares its cores with Serve's proxy and the HTTP handling, so they sleep by default (16 clients on 2 "
    "cores: level to a few per cent more tokens/s than spinning; docs/serving.md).",
)
@click.option(
    "--max-queue",
    type=click.IntRange(min=0),
    default=MAX_WAITING,
    show_default=True,
    help="Requests waiting per replica; one more is answered 503 at once.",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=REQUEST_TIMEOUT_S,
    show_default=True,
    help="Seconds a request may take, waiting included; then 504.",
)
@click.option(
    "--max-body-bytes",
    type=click.IntRange(min=1),
    default=MAX_BODY_BYTES,
    show_default=True,
    help="Larger bodies: 413.",
)
def serve(
    export: Path,
    host: str,
    port: int,
    replicas: int,
    max_replicas: int | None,
    address: str | None,
    detach: bool,
    api_key: str | None,
    model_name: str | None,
    provider: ProviderName,
    threads: int | None,
    cpus_per_replica: float | None,
    gpus_per_replica: float | None,
    max_batch: int,
    kv_cache: KvCacheFormat,
    prompt_kernel: PromptKernel,
    single_row_head: bool,
    spinning: bool,
    max_queue: int,
    timeout: float,
    max_body_bytes: int,
) -> None:
    """Serve an EXPORT folder through an OpenAI-compatible completions API.

    Without --address a local Ray starts on this machine and stops with the command (Ctrl-C). Requests that
    arrive while others generate join the running batch at its next step.

    \b
    Examples:
      gpt2-onnx serve out                                   # http://127.0.0.1:8000/v1
      gpt2-onnx serve out --replicas 2 --api-key secret
      gpt2-onnx serve /shared/out --address ray://head:10001 --replicas 4 --detach
    """
    _check_options(address, detach, replicas, max_replicas, provider, gpus_per_replica, kv_cache, prompt_kernel)
    root = click.get_current_context().find_root()
    verbose = bool(root.params.get("verbose") or root.meta.get(VERBOSE_KEY))  # -v before or after COMMAND
    _prepare_serving(export, address, provider, prompt_kernel)
    from gpt2_onnx.app import serving  # imported by _prepare_serving, which reports a missing extra
    from gpt2_onnx.app.loopback import is_loopback
    from gpt2_onnx.app.openai_api import ApiSettings

    replica = serving.ReplicaConfig(
        export=str(export.resolve()),
        api=ApiSettings(
            model_name=model_name or export.resolve().name,
            api_key=api_key or None,
            max_body_bytes=max_body_bytes,
            timeout_s=timeout,
        ),
        engine=serving.EngineOptions(max_rows=max_batch, max_waiting=max_queue),
        provider=provider,
        threads=threads,  # None: the replica's Ray CPUs (serving.replica_threads), as for a Serve config file
        kv_cache=kv_cache,
        prompt_kernel=prompt_kernel,
        single_row_head=single_row_head,
        spinning=spinning,
    )
    config = _serve_config(
        replica,
        host=host,
        port=port,
        replicas=replicas,
        max_replicas=max_replicas,
        address=address,
        cpus_per_replica=cpus_per_replica,
        gpus_per_replica=gpus_per_replica,
        verbose=verbose,
    )
    if not is_loopback(host) and not config.replica.api.api_key:
        click.echo(f"Warning: listening on {host} without an API key; anyone who reaches it can use it.", err=True)
    try:
        serving.serve_until_stopped(config, lambda deployed: _announce(config, deployed, detach), detach)
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM, and everything it started is stopped: the normal end, exit 0
        ignore_interrupts()  # a signal that comes now, while the interpreter exits, must not change the status
        click.echo("Stopped.", err=True)


def _prepare_serving(
    export: Path, address: str | None, provider: ProviderName, kernel: PromptKernel = "export"
) -> None:
    """Set Ray's environment before it is imported, import the application layer's serving (the serve extra), and
    check the export where it can be checked: here without --address; on a cluster only if the folder is here."""
    if address is None:  # before Ray is imported: its services then listen on loopback only
        os.environ.setdefault(RAY_SINGLE_MACHINE, "0")
        if not any(name in os.environ for name in RAY_AUTH_VARIABLES):  # the user's own Ray settings stand
            os.environ["RAY_AUTH_MODE"] = "token"
            os.environ["RAY_AUTH_TOKEN"] = secrets.token_hex(32)
    try:
        from gpt2_onnx.app import serving
    except ImportError as exc:
        raise MissingDependencyError(f"{EXTRA_HINT} ({exc})") from exc
    if address is None:
        serving.check_here(export, provider, kernel)
    elif export.exists():  # on a cluster the folder may exist on its nodes only, and the GPUs too
        serving.check_here(export, None, kernel)


def _serve_config(
    replica: ReplicaConfig,
    *,
    host: str,
    port: int,
    replicas: int,
    max_replicas: int | None,
    address: str | None,
    cpus_per_replica: float | None,
    gpus_per_replica: float | None,
    verbose: bool,
) -> ServeConfig:
    """The deployment ``serve`` runs, as its flags gave it; each replica's Ray CPUs and GPUs, where not given, as
    the help says (:func:`_cpus_per_replica`; with --provider cuda, CUDA_GPUS_PER_REPLICA)."""
    from gpt2_onnx.app import serving  # imported by _prepare_serving, which reports a missing extra

    gpus = CUDA_GPUS_PER_REPLICA if replica.provider == "cuda" else 0.0
    config: ServeConfig = serving.ServeConfig(
        replica=replica,
        host=host,
        port=port,
        replicas=replicas,
        max_replicas=max_replicas,
        address=address,
        cpus_per_replica=_cpus_per_replica(cpus_per_replica, address, replicas, max_replicas),
        gpus_per_replica=gpus if gpus_per_replica is None else gpus_per_replica,
        log_level=logging.INFO if verbose else logging.ERROR,
    )
    return config


def _announce(config: ServeConfig, deployed: Deployed, detach: bool) -> None:
    for note in deployed.notes:
        click.echo(f"Warning: {note}.", err=True)
    top = config.max_replicas if config.max_replicas and config.max_replicas > config.replicas else None
    count = f"{config.replicas}-{top}" if top else str(config.replicas)
    where = "this machine" if config.address is None else f"the Ray cluster at {config.address}"
    click.echo(f"Serving '{config.replica.api.model_name}' at {deployed.url} ({count} replica(s) on {where}).")
    click.echo("Detached: the API stays up on the cluster." if detach else "Press Ctrl-C to stop.")
