"""Reading SmolLM2's heads beyond their weights (the Read the model page on the decoder): a
repeated random token sequence for the head detector's scores, and heads removed measured on
the next token's log-probability — every single head at once, in batches.

    m = DecoderModel.load()
    r = m.run("The capital of France is")
    logprobs_without_heads(m, r, masks)          # (B, vocab): the next token, each mask's heads off
    single_head_logprobs(m, r, targets)         # (layers, heads, len(targets))

A head removed at layer l changes nothing before l, so each variant starts from the run's own
residual stream before layer l (``run.hidden_states[l]``) and the variants of one layer run the
remaining layers side by side, as a batch (``DecoderModel.run_layers``: the model's one layer,
``models.decoders.llama_layer``, with a head mask per sequence): the 270 single heads cost about as
much as 30 · 31 / 2 = 465 layer passes, not 270 whole runs.
"""

from __future__ import annotations

import numpy as np

from attnviz.core.engine import log_softmax
from attnviz.models.decoders.decoder import DecoderModel, DecoderRun

REPEAT_LENGTH = 20          # random tokens, then the same tokens again
COMMON = 10_000             # drawn among the first ids: BPE and SentencePiece give common words low ids
WORD_START = "Ġ▁"           # a piece that starts a word: byte-level BPE's space, SentencePiece's
_DTYPE = np.float32


# ---- a repeated random sequence --------------------------------------------------------------

def repeated_random_text(model: DecoderModel, length: int = REPEAT_LENGTH,
                         seed: int = 0) -> tuple[str, np.ndarray]:
    """(text, ids): `length` random whole-word tokens (" river", " seven", … drawn from the
    first COMMON ids of the vocabulary with numpy's generator seeded by `seed`), then the same
    tokens again — the sequence on which TransformerLens finds induction heads. The text
    encodes back to exactly these 2 · length ids, after the model's BOS where it puts one
    first (Gemma; a word whose text encodes to another token is never drawn)."""
    pieces = (model.piece(i) for i in range(COMMON))
    words = [i for i, p in enumerate(pieces)
             if len(p) > 3 and p[0] in WORD_START and p[1:].isascii() and p[1:].isalpha()
             and p[1:].islower()]
    start = [model.config.bos_id] if model.config.add_bos else []   # what a text begins with
    rng = np.random.default_rng(seed)
    chosen: list[int] = []
    while len(chosen) < length:
        i = int(rng.choice(words))
        if i not in chosen and model.encode(model.decode([i])).tolist() == start + [i]:
            chosen.append(i)
    ids = np.array(start + chosen * 2, dtype=np.intp)
    text = model.decode(chosen * 2)
    assert model.encode(text).tolist() == ids.tolist()      # whole words split at spaces
    return text, ids


# ---- heads removed: the next token's log-probability -------------------------------------------

def logprobs_without_heads(model: DecoderModel, run: DecoderRun, masks) -> np.ndarray:
    """(B, vocab) float64: log-probabilities of the token after run.ids with, for each of the
    B masks (B, layers, heads) of 0/1, the heads at 0 removed (their Z zeroed before W_O, as
    ``DecoderModel.run(head_mask=…)``). Each mask starts at the first layer it changes."""
    masks = np.asarray(masks, dtype=_DTYPE)
    out = np.empty((len(masks), model.vocab_size))
    touched = (masks == 0).any(axis=-1)                              # (B, L)
    first = np.where(touched.any(axis=-1), touched.argmax(axis=-1), model.num_layers)
    for start in np.unique(first):
        chosen = np.flatnonzero(first == start)
        out[chosen] = _from_layer(model, run, int(start), masks[chosen])
    return out


def single_head_logprobs(model: DecoderModel, run: DecoderRun, targets,
                         on_progress=None) -> np.ndarray:
    """(layers, heads, len(targets)): the log-probability of each target token id after
    run.ids with one head removed, for every head; on_progress(done, total) after each layer."""
    layers, heads = model.num_layers, model.num_heads
    targets = np.asarray(targets, dtype=np.intp)
    out = np.empty((layers, heads, len(targets)))
    for layer in range(layers):
        masks = np.ones((heads, layers, heads), _DTYPE)
        masks[np.arange(heads), layer, np.arange(heads)] = 0
        out[layer] = _from_layer(model, run, layer, masks)[:, targets]
        if on_progress is not None:
            on_progress(layer + 1, layers)
    return out


def _from_layer(model: DecoderModel, run: DecoderRun, start: int, masks) -> np.ndarray:
    """(B, vocab) log-probabilities after run.ids, the layers from `start` on run for each
    mask side by side, starting from the run's residual stream before layer `start`."""
    h = np.repeat(run.hidden_states[start][None], len(masks), axis=0)   # (B, n, d_model)
    h = model.run_layers(h, start, head_mask=masks)                    # (B, n, d_model)
    return log_softmax(model.unembed(h[:, -1]).astype(np.float64))    # (B, vocab)


__all__ = ["REPEAT_LENGTH", "logprobs_without_heads", "repeated_random_text",
           "single_head_logprobs"]
