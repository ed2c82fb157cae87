"""Load the source model: a local GPT2LMHeadModel folder, a Hugging Face Hub id, or ``random:NAME``.

Checkpoints load from safetensors, or from a pickle only through ``torch.load(weights_only=True)``; no code from a
checkpoint ever runs. A checkpoint that leaves weights uninitialised is refused rather than exported with random
values.
"""

from __future__ import annotations

import json
import logging
import os
import pickle
import re
import socket
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from safetensors import SafetensorError

from gpt2_onnx_core.config import RANDOM_WEIGHTS_SEED, ModelDims
from gpt2_onnx_core.errors import HubUnreachableError, ModelLoadError, OptionError, UnsupportedModelError, first_line
from gpt2_onnx_core.names import MODEL_CONFIG_FILE
from gpt2_onnx_exporters.random_models import build_random_model, random_preset_name
from gpt2_onnx_exporters.tokenizer_files import PACKAGED_TOKENIZER, load_packaged_gpt2_tokenizer

if TYPE_CHECKING:
    from transformers import GPT2LMHeadModel, PreTrainedTokenizerBase

__all__ = ["SourceModel", "is_tied", "load_source", "load_tokenizer", "model_dims"]

log = logging.getLogger(__name__)

_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.\-]*(/[\w.\-]+)?$")
_OFFLINE_CHOICES = "offline choices: a local folder (--model ./my-gpt2) or random weights (--model random:gpt2)"
# Keys a GPT-2 checkpoint may lack without harm: the tied head, and causal-mask buffers older releases saved.
_OPTIONAL_KEYS = re.compile(r"^(lm_head\.weight|.*attn\.(masked_)?bias)$")
# Exceptions transformers, safetensors, pickle and torch raise for unreadable checkpoints.
_READ_ERRORS: tuple[type[BaseException], ...] = (
    OSError,
    ValueError,
    RuntimeError,
    KeyError,
    EOFError,
    pickle.UnpicklingError,
    SafetensorError,
)


@dataclass(frozen=True)
class SourceModel:
    """A loaded checkpoint with its tokenizer and where it came from."""

    model: GPT2LMHeadModel  # eval mode, float32, eager attention
    tokenizer: PreTrainedTokenizerBase
    source: str  # what --model said
    seed: int | None  # for random:NAME
    revision: str | None

    @property
    def dims(self) -> ModelDims:
        return model_dims(self.model)


def is_tied(model: GPT2LMHeadModel) -> bool:
    """True when the LM head is the token embedding tensor itself."""
    head, embedding = model.lm_head.weight, model.transformer.wte.weight
    return head is embedding or head.data_ptr() == embedding.data_ptr()


def model_dims(model: GPT2LMHeadModel) -> ModelDims:
    config = model.config
    return ModelDims(
        n_layer=config.n_layer,
        n_head=config.n_head,
        n_embd=config.n_embd,
        vocab_size=model.transformer.wte.weight.shape[0],
        n_positions=config.n_positions,
    )


def _looks_like_path(spec: str) -> bool:
    return spec.startswith((".", "/", "~")) or "\\" in spec or os.path.exists(spec) or not _HUB_ID.match(spec)


def _read_config(folder: Path) -> dict[str, Any]:
    config_file = folder / MODEL_CONFIG_FILE
    if not config_file.is_file():
        raise ModelLoadError(
            f"'{folder}' has no config.json; pass a Hugging Face model folder, a hub id or random:NAME"
        )
    try:
        data = json.loads(config_file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ModelLoadError(f"cannot read {config_file}: {exc}") from exc
    if not isinstance(data, dict):
        raise ModelLoadError(f"{config_file} is not a JSON object")
    return data


def _check_architecture(config: dict[str, Any], where: str) -> None:
    model_type = config.get("model_type")
    architectures = config.get("architectures") or []
    if model_type != "gpt2":
        arch = ", ".join(architectures) or "no architectures listed"
        raise UnsupportedModelError(
            f"'{where}' is a {model_type or 'unknown'} model ({arch}); gpt2-onnx exports GPT-2 (GPT2LMHeadModel) only"
        )
    if architectures and not {"GPT2LMHeadModel", "GPT2Model"} & set(architectures):
        raise UnsupportedModelError(
            f"'{where}' is a {', '.join(architectures)}; gpt2-onnx exports GPT-2 language models (GPT2LMHeadModel)"
        )
    if config.get("add_cross_attention"):
        raise UnsupportedModelError(f"'{where}' has cross-attention layers; gpt2-onnx exports decoder-only GPT-2")


def _weights_kind(folder: Path) -> str:
    if any(folder.glob("*.safetensors")) or (folder / "model.safetensors.index.json").is_file():
        return "safetensors"
    if any(folder.glob("pytorch_model*.bin")):
        return "pickle"
    raise ModelLoadError(f"'{folder}' has no weights (model.safetensors or pytorch_model.bin)")


def _from_pretrained(where: str, use_safetensors: bool | None, revision: str | None, **kwargs: Any) -> GPT2LMHeadModel:
    from transformers import GPT2LMHeadModel

    try:
        with warnings.catch_warnings():
            # torch's weights-only unpickler warns of any pickle protocol above torch.save's 2 (Python's own pickle
            # writes 4 or 5) and asks to file an issue, then loads or refuses the file as it should: a load error is
            # reported as one, and the warning is not the user's concern.
            warnings.filterwarnings("ignore", message="Detected pickle protocol", category=UserWarning)
            loaded: Any = GPT2LMHeadModel.from_pretrained(
                where,
                revision=revision or "main",
                use_safetensors=use_safetensors,
                weights_only=True,  # a pickle may hold tensors only; never code
                attn_implementation="eager",  # the reference semantics, reorder_and_upcast_attn included
                output_loading_info=True,
                dtype="float32",
                **kwargs,
            )
    except _READ_ERRORS as exc:
        raise ModelLoadError(f"cannot load the checkpoint '{where}': {first_line(exc)}") from exc
    model, info = loaded  # output_loading_info=True returns (model, info)
    missing = [key for key in info.get("missing_keys", []) if not _OPTIONAL_KEYS.match(key)]
    mismatched = info.get("mismatched_keys", [])
    if missing or mismatched:
        bad = ", ".join(sorted(map(str, missing + list(mismatched)))[:5])
        raise ModelLoadError(
            f"the checkpoint '{where}' lacks or mismatches weights ({bad}); refusing to export them random"
        )
    return model.eval()


def _hub_reachable(timeout_s: float = 5.0) -> bool:
    """A quick TCP probe of the Hub endpoint, so an offline machine gets an answer at once, not after retries."""
    from huggingface_hub import constants

    if constants.HF_HUB_OFFLINE:
        return False
    url = urlparse(constants.ENDPOINT)
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        with socket.create_connection((url.hostname or "huggingface.co", port), timeout=timeout_s):
            return True
    except OSError:
        return False


def _hub_config(hub_id: str, revision: str | None, local_only: bool) -> dict[str, Any]:
    """The hub id's config, from the local cache only or fetched; raises one of ``_READ_ERRORS`` where it can't."""
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(hub_id, revision=revision, local_files_only=local_only)
    found: dict[str, Any] = config.to_dict()
    return found


def _load_from_hub(hub_id: str, revision: str | None) -> GPT2LMHeadModel:
    cached: dict[str, Any] | None
    try:  # the local cache first: works offline once downloaded, checked as a folder is
        cached = _hub_config(hub_id, revision, local_only=True)
    except _READ_ERRORS:
        cached = None
    if cached is not None:
        _check_architecture(cached, hub_id)
        try:
            return _from_pretrained(hub_id, None, revision, local_files_only=True)
        except ModelLoadError:
            pass  # the config is cached, the weights are not (yet)
    if not _hub_reachable():
        raise HubUnreachableError(
            f"'{hub_id}' is not a local folder and the Hugging Face Hub cannot be reached (nor is it cached); "
            f"{_OFFLINE_CHOICES}"
        )
    try:
        config = _hub_config(hub_id, revision, local_only=False)
    except _READ_ERRORS as exc:
        raise ModelLoadError(f"cannot fetch '{hub_id}' from the Hugging Face Hub: {first_line(exc)}") from exc
    _check_architecture(config, hub_id)
    return _from_pretrained(hub_id, None, revision)


def load_tokenizer(spec: str, revision: str | None = None) -> PreTrainedTokenizerBase:
    """A fast tokenizer from a folder, a hub id, or ``packaged:gpt2`` (the real GPT-2 BPE files, offline)."""
    if spec == PACKAGED_TOKENIZER:
        return load_packaged_gpt2_tokenizer()
    from transformers import AutoTokenizer

    local = _looks_like_path(spec)
    if local and Path(spec).expanduser().is_file():
        raise ModelLoadError(f"tokenizer '{spec}' is a file, not a tokenizer folder")
    if local and not Path(spec).expanduser().is_dir():
        raise ModelLoadError(f"tokenizer folder '{spec}' does not exist")
    if not local and not _hub_reachable():
        try:
            return AutoTokenizer.from_pretrained(spec, revision=revision, local_files_only=True)
        except _READ_ERRORS as exc:
            raise HubUnreachableError(
                f"tokenizer '{spec}' is not cached and the Hugging Face Hub cannot be reached; "
                f"use --tokenizer {PACKAGED_TOKENIZER} (the real GPT-2 BPE files, offline)"
            ) from exc
    try:
        return AutoTokenizer.from_pretrained(str(Path(spec).expanduser()) if local else spec, revision=revision)
    except _READ_ERRORS as exc:
        raise ModelLoadError(
            f"no usable tokenizer in '{spec}' ({first_line(exc)}); "
            f"pass --tokenizer FOLDER or --tokenizer {PACKAGED_TOKENIZER}"
        ) from exc


def load_source(
    spec: str, seed: int | None = None, tokenizer: str | None = None, revision: str | None = None
) -> SourceModel:
    """Load ``spec`` (folder, hub id or random:NAME; ``seed`` for random weights, RANDOM_WEIGHTS_SEED when None)
    and its tokenizer (or ``tokenizer`` when given). A ``revision`` is a Hub revision: refused for a folder or
    random weights."""
    preset = random_preset_name(spec)
    if preset is not None:
        _refuse_revision(revision, f"'{spec}' is built here from a seed")
        seed = RANDOM_WEIGHTS_SEED if seed is None else seed
        model = build_random_model(preset, seed).eval()
        model.config._attn_implementation = "eager"
        tok = load_tokenizer(tokenizer or PACKAGED_TOKENIZER)
        _check_vocab(model, tok, spec)
        return SourceModel(model, tok, spec, seed, None)
    if _looks_like_path(spec):
        _refuse_revision(revision, f"'{spec}' is a local folder")
        folder = Path(spec).expanduser()
        if folder.is_file():
            raise ModelLoadError(f"model '{spec}' is a file, not a model folder (a Hugging Face checkpoint folder)")
        if not folder.is_dir():
            raise ModelLoadError(f"model folder '{spec}' does not exist")
        _check_architecture(_read_config(folder), spec)
        kind = _weights_kind(folder)
        model = _from_pretrained(str(folder), kind == "safetensors", None, local_files_only=True)
        tok = load_tokenizer(tokenizer or str(folder))
    else:
        model = _load_from_hub(spec, revision)
        tok = load_tokenizer(tokenizer or spec, revision)
    _check_vocab(model, tok, spec)
    return SourceModel(model, tok, spec, None, revision)


def _refuse_revision(revision: str | None, why: str) -> None:
    if revision is not None:
        raise OptionError("{revision} selects a Hugging Face Hub revision, and " + why, "revision")


def _check_vocab(model: GPT2LMHeadModel, tokenizer: PreTrainedTokenizerBase, spec: str) -> None:
    vocab_rows = model.transformer.wte.weight.shape[0]
    if len(tokenizer) > vocab_rows:
        raise ModelLoadError(
            f"the tokenizer of '{spec}' has {len(tokenizer)} tokens but the model's embedding only {vocab_rows} rows"
        )
