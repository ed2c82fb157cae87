"""The Python API an application embeds: load an export folder once, generate from many threads.

Thread safety: a loaded :class:`Gpt2Onnx` is immutable and its ONNX Runtime sessions allow concurrent runs, so
``generate``, ``generate_ids``, ``stream`` and ``prefill``/``decode`` may be called from several threads at once;
each call keeps its own KV cache. A ``stream`` iterator itself belongs to the thread that consumes it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np

from gpt2_onnx_core.config import ModelDims
from gpt2_onnx_core.errors import InvalidInputError, OptionError
from gpt2_onnx_core.manifest import Manifest
from gpt2_onnx_core.names import DECODE, PREFILL
from gpt2_onnx_core.perplexity import Perplexity, WindowPlan, model_plan
from gpt2_onnx_core.providers import ProviderName
from gpt2_onnx_runtimes.export_folder import ExportFolder
from gpt2_onnx_runtimes.generate import generate_ids
from gpt2_onnx_runtimes.generation import Generation, GenerationOptions, GenerationResult
from gpt2_onnx_runtimes.generation_defaults import CheckpointDefaults, ResolvedOptions
from gpt2_onnx_runtimes.perplexity import export_log_probs
from gpt2_onnx_runtimes.prompt_checks import check_prompt_text
from gpt2_onnx_runtimes.runtime_options import RuntimeOptions
from gpt2_onnx_runtimes.session import LoadedExport
from gpt2_onnx_runtimes.streaming import TextStream
from gpt2_onnx_runtimes.tokenizer import TextTokenizer
from gpt2_onnx_runtimes.validation import validate_feeds

__all__ = ["Gpt2Onnx"]


class Gpt2Onnx:
    """A loaded export folder: both sessions on one provider, plus its tokenizer and the checkpoint's generation
    defaults (``generation_config.json``).

    ``generate``, ``generate_ids`` and ``stream`` without options use the checkpoint's defaults (:meth:`options`);
    a :class:`GenerationOptions` given is used exactly as it is.
    """

    def __init__(
        self, loaded: LoadedExport, tokenizer: TextTokenizer, defaults: CheckpointDefaults | None = None
    ) -> None:
        self._loaded = loaded
        self.tokenizer = tokenizer
        self.checkpoint_defaults = defaults or CheckpointDefaults()

    @classmethod
    def load(
        cls, folder: str | Path, provider: ProviderName | None = None, options: RuntimeOptions | None = None
    ) -> Gpt2Onnx:
        """Load ``folder`` through its manifest on ``provider`` ("cpu" or "cuda"); never falls back to another.

        The provider is ``provider`` if given, else ``options.provider``, else the CPU; giving both, different,
        is an :class:`InvalidInputError` (neither silently wins)."""
        if isinstance(provider, RuntimeOptions):  # load(folder, RuntimeOptions(...)): the options in provider's place
            raise InvalidInputError("RuntimeOptions go in options=, not in provider's place: load(folder, options=...)")
        if options is None:
            options = RuntimeOptions(provider=provider or "cpu")
        elif provider is not None and provider != options.provider:
            raise InvalidInputError(
                f"provider '{provider}' contradicts options.provider '{options.provider}'; give one of them"
            )
        return cls.open(ExportFolder.open(folder, options.integrity), options)

    @classmethod
    def open(cls, export: ExportFolder, options: RuntimeOptions | None = None) -> Gpt2Onnx:
        """Load an opened folder (its files checked once, its tokenizer and defaults read once)."""
        loaded = LoadedExport.open(export, options or RuntimeOptions())
        return cls(loaded, export.tokenizer, export.defaults)

    @property
    def manifest(self) -> Manifest:
        return self._loaded.manifest

    @property
    def dims(self) -> ModelDims:
        return self._loaded.manifest.dims

    @property
    def providers(self) -> dict[str, list[str]]:
        """The providers each session created so far actually runs on ("generation" in the merged layout)."""
        return self._loaded.providers()

    def options(self, **given: object) -> GenerationOptions:
        """GenerationOptions from the checkpoint's defaults, ``given`` options winning (``max_new_tokens=20``)."""
        return self.checkpoint_defaults.resolve(**given).options

    def resolve_options(self, **given: object) -> ResolvedOptions:
        """As :meth:`options`, with where each value came from and which checkpoint values were not used."""
        return self.checkpoint_defaults.resolve(**given)

    def encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(text)

    def decode(self, ids: Sequence[int]) -> str:
        return self.tokenizer.decode(ids)

    def _prompt_ids(self, prompts: Sequence[str]) -> list[list[int]]:
        encoded = []
        for index, prompt in enumerate(prompts):
            ids = self.encode(check_prompt_text(prompt, f"prompt {index}"))
            if not ids:
                raise InvalidInputError(f"prompt {index} is empty")
            encoded.append(ids)
        return encoded

    def generate(
        self, prompts: str | Sequence[str], options: GenerationOptions | None = None
    ) -> list[GenerationResult]:
        """Generate for one prompt or a batch (left-padded together): ``num_return_sequences`` results per prompt,
        prompt-major (each result's ``index`` and ``sequence`` say which), best first."""
        texts = [prompts] if isinstance(prompts, str) else list(prompts)
        results = self.generate_ids(self._prompt_ids(texts), options)
        return [replace(result, prompt=texts[result.index]) for result in results]

    def generate_ids(
        self, prompt_ids: Sequence[Sequence[int]], options: GenerationOptions | None = None
    ) -> list[GenerationResult]:
        """Generate from token ids (a batch of prompts)."""
        return generate_ids(self._loaded, prompt_ids, options or self.options(), self.tokenizer)

    def stream(self, prompt: str, options: GenerationOptions | None = None) -> TextStream:
        """Iterate text as tokens arrive; a character split across tokens comes out whole, and nothing past a stop
        string is yielded. The chunks join to the text :meth:`generate` returns; ``.result`` has the rest."""
        options = options or self.options()
        if options.num_return_sequences > 1 or options.sequences_drawn > 1:
            several, name = max(
                (options.num_return_sequences, "num_return_sequences"), (options.sequences_drawn, "best_of")
            )
            raise OptionError(f"a stream gives one sequence, not {{{name}}} {several}: use generate", name)
        generation = Generation(self._loaded, self._prompt_ids([prompt]), options, self.tokenizer)
        return TextStream(generation, self.tokenizer, options.stop, prompt)

    def prefill(
        self, input_ids: np.ndarray, attention_mask: np.ndarray, position_ids: np.ndarray
    ) -> dict[str, np.ndarray]:
        """One checked run of the folder's prefill graph (inputs validated before ONNX Runtime sees them). In the
        merged layout the graph's own session is created on the first call."""
        feeds = {"input_ids": input_ids, "attention_mask": attention_mask, "position_ids": position_ids}
        validate_feeds(PREFILL, feeds, self.dims)
        return self._loaded.run(PREFILL, feeds)

    def decode_step(
        self,
        input_ids: np.ndarray,
        attention_mask: np.ndarray,
        position_ids: np.ndarray,
        past: Mapping[str, np.ndarray],
    ) -> dict[str, np.ndarray]:
        """One checked run of the folder's decode graph with an explicit past (``past_key_values.{i}.key|value``);
        logits for every new token. In the merged layout the graph's own session is created on the first call."""
        feeds = {
            "input_ids": input_ids,
            "attention_mask": attention_mask,
            "position_ids": position_ids,
            **past,
        }
        validate_feeds(DECODE, feeds, self.dims)
        return self._loaded.run(DECODE, feeds)

    def perplexity(self, text: str, window: int | None = None, stride: int | None = None) -> Perplexity:
        """The export's sliding-window perplexity of ``text`` (Hugging Face's recipe): windows of ``window``
        tokens (default: the model's positions) every ``stride`` tokens (default: half the window), each scoring
        only the tokens the previous one did not. ``.value`` is the perplexity, ``.plan`` the windows."""
        if not isinstance(text, str):
            raise InvalidInputError(f"perplexity takes text, not a {type(text).__name__}")
        ids = self.encode(text)
        return self.perplexity_of_ids(ids, model_plan(len(ids), self.dims.n_positions, window, stride))

    def perplexity_of_ids(self, ids: Sequence[int], plan: WindowPlan) -> Perplexity:
        """As :meth:`perplexity`, for token ids and a plan made with :func:`gpt2_onnx_core.perplexity.plan_windows`."""
        return Perplexity.of(plan, self.token_log_probs(ids, plan))

    def token_log_probs(self, ids: Sequence[int], plan: WindowPlan) -> np.ndarray:
        """log p(token | the tokens before it in its window) of every token ``plan`` scores, in order (float64)."""
        return export_log_probs(self._loaded, ids, plan)
