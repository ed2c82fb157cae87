"""The module we trace: GPT-2's forward over explicit KV tensors, built from a GPT2LMHeadModel's own parameters.

Why not trace transformers' forward: its Cache API changes every few releases and its mask code bakes control flow
into traces. This module computes the same function (transformers' GPT2LMHeadModel with eager attention stays the
reference that parity is measured against) with plain tensor arithmetic:

    input_ids ─ Gather(wte) ─┐
    position_ids ─ Gather(wpe) ─ Add ─ [block × n_layer] ─ LayerNorm(ln_f) ─ Gemm(wte, transB=1) ─ logits
    attention_mask ─ causal & padding mask ─────┘
    past K/V ─ Concat ─ present K/V (per block)

Where only the last position's logits are wanted (prefill's default), the last block keeps every position through
its attention (the present K/V need them all) and then slices its attention output and residual stream to the last
position: its output projection, MLP and the final norm run on one row per sequence. No later operation reads
another position, so the logits are those of slicing at the end, up to the kernels' summation order (for a
GPT-2-small prompt, about 6 % of its projections' work: three quarters of one layer in twelve).

The LM head multiplies by the token embedding with the transpose as a Gemm attribute (``F.linear`` on a 2-D input),
as the original TF code does; a graph-level Transpose of the embedding would be folded by optimizers into a second
[vocab × d] copy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

import torch
import torch.nn.functional as F
from torch import nn

from gpt2_onnx_core.errors import UnsupportedModelError
from gpt2_onnx_core.names import DECODE, PREFILL, GraphKind
from gpt2_onnx_exporters.source import is_tied

if TYPE_CHECKING:
    from transformers import GPT2LMHeadModel
    from transformers.models.gpt2.modeling_gpt2 import GPT2Block

__all__ = ["Gpt2GraphModule"]


def _activation(name: str) -> nn.Module:
    from transformers.activations import get_activation

    try:
        return get_activation(name)
    except KeyError as exc:
        raise UnsupportedModelError(f"activation_function '{name}' is not one transformers knows") from exc


class Gpt2GraphModule(nn.Module):
    """GPT-2 as a pure function of (input_ids, attention_mask, position_ids[, past KV]) → (logits, present KV).

    Args:
        model: the source checkpoint; its parameters are shared, not copied, so initializer names follow the
            checkpoint's own (``transformer.h.0.attn.c_attn.weight``) and the tie survives tracing.
        kind: ``prefill`` (no past inputs) or ``decode`` (past KV inputs; past may be empty).
        last_logits_only: return the logits of the last position only (prefill's default).
    """

    def __init__(self, model: GPT2LMHeadModel, kind: GraphKind, last_logits_only: bool) -> None:
        super().__init__()
        config = model.config
        self.kind = kind
        self.last_logits_only = last_logits_only
        self.transformer = model.transformer
        # With a tied head the Gemm reads wte itself; otherwise the checkpoint's own head.
        self.lm_head = None if is_tied(model) else model.lm_head
        self.n_head: int = config.n_head
        self.n_embd: int = config.n_embd
        self.head_dim = self.n_embd // self.n_head
        self.eps: float = config.layer_norm_epsilon
        self.act = _activation(config.activation_function)
        # HF's unified scaling: 1/sqrt(head_dim) if scale_attn_weights, then 1/(layer+1) if by inverse layer index.
        base = self.head_dim**-0.5 if config.scale_attn_weights else 1.0
        self.scalings = [
            base / float(i + 1) if config.scale_attn_by_inverse_layer_idx else base for i in range(config.n_layer)
        ]

    def forward(
        self,
        input_ids: torch.Tensor,  # (B, T) int64
        attention_mask: torch.Tensor,  # (B, S) int64, S = P + T
        position_ids: torch.Tensor,  # (B, T) int64
        past_key_values: tuple[torch.Tensor, ...] = (),  # 2 × n_layer tensors (B, nh, P, hs), key then value
    ) -> tuple[torch.Tensor, ...]:
        t = self.transformer
        hidden = F.embedding(input_ids, t.wte.weight) + F.embedding(position_ids, t.wpe.weight)  # (B, T, d)
        bias = self._attention_bias(attention_mask, input_ids.shape[1], hidden.dtype)  # (B, 1, T, S)
        presents: list[torch.Tensor] = []
        # torch types a ModuleList's items as Module (third-party typing); these are GPT2Blocks
        blocks = cast("list[GPT2Block]", t.h)
        for i, block in enumerate(blocks):
            past = (past_key_values[2 * i], past_key_values[2 * i + 1]) if self.kind == DECODE else None
            if past is not None and past[0].dtype != hidden.dtype:  # fp16 weights: the float32 cache is cast in
                past = (past[0].to(hidden.dtype), past[1].to(hidden.dtype))
            last_position = self.last_logits_only and i == len(blocks) - 1
            hidden, key, value = self._block(block, i, hidden, bias, past, last_position)
            presents += [key, value]
        if self.last_logits_only and not blocks:
            hidden = hidden[:, -1:, :]  # (B, 1, d); with blocks, the last one has kept the last position only
        hidden = F.layer_norm(hidden, (self.n_embd,), t.ln_f.weight, t.ln_f.bias, self.eps)  # (B, T or 1, d)
        batch, length = hidden.shape[0], hidden.shape[1]
        head = t.wte.weight if self.lm_head is None else self.lm_head.weight  # (V, d)
        # (B·T, d) × (V, d)ᵀ as Gemm(transB=1): the embedding is read as stored, never transposed into a copy.
        logits = F.linear(hidden.reshape(-1, self.n_embd), head)  # (B·T, V)
        if self.lm_head is not None and self.lm_head.bias is not None:
            logits = logits + self.lm_head.bias
        if logits.dtype != torch.float32:  # fp16 weights: the contract's outputs stay float32
            logits = logits.float()
            presents = [kv.float() for kv in presents]
        return (logits.reshape(batch, length, -1), *presents)  # (B, T, V), then (B, nh, S, hs) each

    @staticmethod
    def _attention_bias(attention_mask: torch.Tensor, new: int, dtype: torch.dtype) -> torch.Tensor:
        """Additive mask: 0 where query i may attend key j (causal and not padding), the dtype's minimum elsewhere.

        The minimum, not -inf, keeps fully masked rows (queries at padded positions) finite, so padding never
        produces NaN that could leak into real rows through 0 × NaN.
        """
        total = attention_mask.shape[1]
        query_pos = torch.arange(new, device=attention_mask.device) + (total - new)  # (T,) absolute positions
        key_pos = torch.arange(total, device=attention_mask.device)  # (S,)
        causal = key_pos[None, :] <= query_pos[:, None]  # (T, S)
        allowed = causal[None, None, :, :] & (attention_mask[:, None, None, :] > 0)  # (B, 1, T, S)
        zero = torch.zeros((), dtype=dtype)
        return torch.where(allowed, zero, torch.finfo(dtype).min)  # (B, 1, T, S)

    def _block(
        self,
        block: GPT2Block,
        layer: int,
        hidden: torch.Tensor,  # (B, T, d)
        bias: torch.Tensor,  # (B, 1, T, S)
        past: tuple[torch.Tensor, torch.Tensor] | None,  # (B, nh, P, hs) each
        last_position: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """One block: the new hidden states (B, T, d), or (B, 1, d) of the last position with ``last_position``,
        and the present key and value (B, nh, S, hs) of every position either way."""
        d, nh, hs = self.n_embd, self.n_head, self.head_dim
        x = F.layer_norm(hidden, (d,), block.ln_1.weight, block.ln_1.bias, self.eps)  # (B, T, d)
        qkv = x @ block.attn.c_attn.weight + block.attn.c_attn.bias  # (B, T, 3d); Conv1D stores (in, out)
        # Slices, not split(): torch.onnx lowers split to opset-18 Split(num_outputs), which opset 17 lacks.
        q = qkv[:, :, :d].unflatten(-1, (nh, hs)).transpose(1, 2)  # (B, nh, T, hs)
        k = qkv[:, :, d : 2 * d].unflatten(-1, (nh, hs)).transpose(1, 2)  # (B, nh, T, hs)
        v = qkv[:, :, 2 * d :].unflatten(-1, (nh, hs)).transpose(1, 2)  # (B, nh, T, hs)
        if past is not None:
            k = torch.cat([past[0], k], dim=2)  # (B, nh, S, hs)
            v = torch.cat([past[1], v], dim=2)  # (B, nh, S, hs)
        scores = torch.matmul(q, k.transpose(-1, -2)) * self.scalings[layer]  # (B, nh, T, S)
        probs = torch.softmax(scores + bias, dim=-1)  # (B, nh, T, S)
        attn = torch.matmul(probs, v).transpose(1, 2).flatten(2)  # (B, T, d)
        if last_position:  # past the attention no position reads another: the rest of the block runs on one row
            attn, hidden = attn[:, -1:, :], hidden[:, -1:, :]  # (B, 1, d) each; left padding keeps it real
        # From here on T is 1 with last_position.
        hidden = hidden + (attn @ block.attn.c_proj.weight + block.attn.c_proj.bias)  # (B, T, d)
        x = F.layer_norm(hidden, (d,), block.ln_2.weight, block.ln_2.bias, self.eps)  # (B, T, d)
        inner = self.act(x @ block.mlp.c_fc.weight + block.mlp.c_fc.bias)  # (B, T, n_inner)
        hidden = hidden + (inner @ block.mlp.c_proj.weight + block.mlp.c_proj.bias)  # (B, T, d)
        return hidden, k, v


def graph_module(model: GPT2LMHeadModel, kind: GraphKind, all_logits: bool) -> Gpt2GraphModule:
    """The module for one graph: prefill keeps only the last position's logits unless ``all_logits``."""
    return Gpt2GraphModule(model, kind, last_logits_only=(kind == PREFILL and not all_logits)).eval()
