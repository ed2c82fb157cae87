"""The one entry point for a batch of token-id prompts: greedy or sampled generation, or beam search, as the options
say (:mod:`gpt2_onnx_runtimes.generation`, :mod:`gpt2_onnx_runtimes.beam_generation`)."""

from __future__ import annotations

from collections.abc import Sequence

from gpt2_onnx_runtimes.beam_generation import BeamSearch
from gpt2_onnx_runtimes.generation import Generation
from gpt2_onnx_runtimes.options import GenerationOptions
from gpt2_onnx_runtimes.results import GenerationResult
from gpt2_onnx_runtimes.session import LoadedExport
from gpt2_onnx_runtimes.tokenizer import TextTokenizer

__all__ = ["generate_ids"]


def generate_ids(
    loaded: LoadedExport,
    prompts: Sequence[Sequence[int]],
    options: GenerationOptions,
    tokenizer: TextTokenizer | None = None,
) -> list[GenerationResult]:
    """Generate for a batch of token-id prompts (left-padded together): greedy, sampled or by beam search, as
    ``options`` say. Results are prompt-major, ``num_return_sequences`` per prompt, best first. Stop strings need
    ``tokenizer``."""
    if options.num_beams > 1:
        return BeamSearch(loaded, prompts, options, tokenizer).run()
    return Generation(loaded, prompts, options, tokenizer).run()
