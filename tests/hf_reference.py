"""transformers as the reference for SmolLM2's layers: its activations at llama_layer's hook
points, read with its own forward hooks (the same GGUF, eager attention, float32)."""

from __future__ import annotations


def hf_activations(hf_decoder, ids, layers) -> dict:
    """transformers' activations at the hook points of `layers`, captured with its own forward
    hooks, in llama_layer's axis order with the batch axis (1, …)."""
    import torch

    model, _ = hf_decoder
    got, handles = {}, []

    def keep(name, layer, tensor):
        got[(layer, name)] = tensor.detach().numpy().copy()

    for layer in layers:
        block = model.model.layers[layer]
        attn = block.self_attn
        handles += [
            block.register_forward_pre_hook(
                lambda m, a, layer=layer: keep("resid_pre", layer, a[0])),
            attn.register_forward_hook(
                lambda m, a, out, layer=layer: keep("attn_out", layer, out[0])),
            block.post_attention_layernorm.register_forward_pre_hook(
                lambda m, a, layer=layer: keep("resid_mid", layer, a[0])),
            block.mlp.register_forward_hook(
                lambda m, a, out, layer=layer: keep("mlp_out", layer, out)),
            block.register_forward_hook(
                lambda m, a, out, layer=layer: keep("resid_post", layer, out)),
            attn.o_proj.register_forward_pre_hook(               # (1, n, H d_v) → (1, H, n, d_v)
                lambda m, a, layer=layer: keep("z", layer, a[0].reshape(1, -1, 9, 64)
                                               .transpose(1, 2))),
            attn.v_proj.register_forward_hook(                   # (1, n, H_kv d_v) → (1, H_kv, n, d_v)
                lambda m, a, out, layer=layer: keep("v", layer, out.reshape(1, -1, 3, 64)
                                                    .transpose(1, 2))),
        ]
    try:
        with torch.no_grad():
            out = model(torch.tensor([list(ids)]), output_attentions=True)
    finally:
        for handle in handles:
            handle.remove()
    for layer in layers:
        got[(layer, "pattern")] = out.attentions[layer].numpy()
    return got
