"""The trace's steps under TransformerLens's hook names: one table, one function.

TransformerLens (``transformer_lens.components.abstract_attention``) names the intermediates
of layer L's attention ``blocks.{L}.attn.hook_*``, with the batch first and the position before
the head in q, k, v and z. A trace has no batch; :func:`transformer_lens_names` gives its
arrays in TransformerLens's axis order without the batch axis:

=================  ====================================  =========================  =======================
attnviz step       TransformerLens hook                  shape (batch dropped)      note
=================  ====================================  =========================  =======================
``q``              ``blocks.{L}.attn.hook_q``            (pos, head, d_head)        before rotary positions
``k``              ``blocks.{L}.attn.hook_k``            (kv_pos, kv_head, d_head)  once per key/value head
``v``              ``blocks.{L}.attn.hook_v``            (kv_pos, kv_head, d_head)  once per key/value head
``q_rotated``      ``blocks.{L}.attn.hook_rot_q``        (pos, head, d_head)        rotary traces only
``k_rotated``      ``blocks.{L}.attn.hook_rot_k``        (kv_pos, kv_head, d_head)  rotary traces only
``masked_scores``  ``blocks.{L}.attn.hook_attn_scores``  (head, q_pos, k_pos)       scaled *and* masked
``weights``        ``blocks.{L}.attn.hook_pattern``      (head, q_pos, k_pos)       the softmax
``z``              ``blocks.{L}.attn.hook_z``            (pos, head, d_head)
(per head)         ``blocks.{L}.attn.hook_result``       (pos, head, d_model)       z_h W_O,h, no b_O
``output``         ``blocks.{L}.hook_attn_out``          (pos, d_model)             W_O and b_O applied
=================  ====================================  =========================  =======================

Careful with the scores: TransformerLens's ``hook_attn_scores`` is QKᵀ already divided by its
attn_scale (√d_head) and with the causal mask applied (−inf) — attnviz's ``masked_scores``
(which equals ``scaled_scores`` when nothing is masked), not ``scores`` (the raw QKᵀ, which has
no hook of its own, nor has ``scaled_scores`` apart from the mask). ``x``, ``context``,
``weighted_values`` and ``concat`` have no hook either (TransformerLens's attention input is
``ln1``'s output, its concat is z reshaped). ``hook_result`` exists in TransformerLens only with
``use_attn_result=True``; it and ``hook_attn_out`` are given only for a trace with W_O (not
``trace_qkv``'s). With grouped-query attention TransformerLens's k and v hooks hold the key/value
heads before they are repeated: so do these. tests/test_transformer_lens.py holds every hook
equal to TransformerLens 3.9's own Attention and GroupedQueryAttention (rotary) on the same
weights, to 1e-12.
"""

from __future__ import annotations

import numpy as np

from attnviz.core.arrays import whole_number
from attnviz.core.grouped_query import shared_kv

# attnviz step → TransformerLens hook name ({L}: the layer). "result" is no step of the trace:
# the per-head output z_h W_O,h before the heads are summed and b_O added.
HOOK_NAMES = {
    "q": "blocks.{L}.attn.hook_q",
    "k": "blocks.{L}.attn.hook_k",
    "v": "blocks.{L}.attn.hook_v",
    "q_rotated": "blocks.{L}.attn.hook_rot_q",
    "k_rotated": "blocks.{L}.attn.hook_rot_k",
    "masked_scores": "blocks.{L}.attn.hook_attn_scores",
    "weights": "blocks.{L}.attn.hook_pattern",
    "z": "blocks.{L}.attn.hook_z",
    "result": "blocks.{L}.attn.hook_result",
    "output": "blocks.{L}.hook_attn_out",
}


def transformer_lens_names(trace, layer: int = 0) -> dict[str, np.ndarray]:
    """`trace`'s arrays under TransformerLens's hook names for `layer`, in its axis order with
    no batch axis (read-only views where a transpose does; see the module's table)."""
    layer = whole_number(layer, "layer", low=0)
    arrays = {
        "q": trace.q.transpose(1, 0, 2),                        # (H, n, d) → (n, H, d)
        "k": trace.k_shared.transpose(1, 0, 2),                 # (H_kv, n_k, d) → (n_k, H_kv, d)
        "v": trace.v_shared.transpose(1, 0, 2),
        "masked_scores": trace.masked_scores,                   # (H, n_q, n_k)
        "weights": trace.weights,
        "z": trace.z.transpose(1, 0, 2),                        # (n_q, H, d_v)
    }
    if trace.rope_base is not None:
        arrays["q_rotated"] = trace.q_rotated.transpose(1, 0, 2)
        arrays["k_rotated"] = shared_kv(trace.k_rotated, trace.num_kv_heads).transpose(1, 0, 2)
    if trace.params is not None:
        w_o = trace.params.w_o.reshape(trace.num_heads, trace.d_v, -1)   # (H, d_v, d_out)
        arrays["result"] = np.einsum("hqd,hdo->qho", trace.z, w_o)       # (n_q, H, d_out)
        arrays["output"] = trace.output                                   # (n_q, d_out)
    return {HOOK_NAMES[step].format(L=int(layer)): arrays[step]
            for step in HOOK_NAMES if step in arrays}
