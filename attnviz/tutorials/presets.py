"""The tutorials' worked examples, each loadable by name and traceable number for number.

Their words (title, description, the rounded-weights note) live in the catalogues, under
``preset.<name>.…``: read in the reader's language, never written here."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from attnviz.core.engine import AttentionTrace, trace_attention, trace_qkv
from attnviz.core.errors import AttnvizInputError
from attnviz.core.inputs import embed_tokens, tokenize
from attnviz.core.weights import MultiHeadWeights
from attnviz.i18n import Message, t


@dataclass(frozen=True, eq=False)
class Preset:
    """One worked example. Either x + weights (projections) or q, k, v entered directly.

    side_notes: extra labelled arrays a page shows beside the trace, each with its note (a
    Message), e.g. the tutorial's rounded softmax; alt_weights: a second weight set to compare
    against (tied vs separate).
    """

    name: str
    tutorial: str
    tokens: list[str]
    x: np.ndarray | None = None
    weights: MultiHeadWeights | None = None
    q: np.ndarray | None = None
    k: np.ndarray | None = None
    v: np.ndarray | None = None
    scale: float | None = None
    sentence: str | None = None
    tokens_k: list[str] | None = None        # key labels where keys are not the tokens
    alt_weights: MultiHeadWeights | None = None
    side_notes: dict = field(default_factory=dict)

    @property
    def title(self) -> str:
        """In the active language (the catalogue's preset.<name>.title)."""
        return t(f"preset.{self.name}.title")

    @property
    def description(self) -> str:
        """In the active language (the catalogue's preset.<name>.description)."""
        return t(f"preset.{self.name}.description")

    @property
    def key_tokens(self) -> list[str]:
        """Labels of the keys (and values): the tokens themselves, unless given apart."""
        return list(self.tokens if self.tokens_k is None else self.tokens_k)

    @property
    def kind(self) -> str:
        return "weights" if self.weights is not None else ("qkv" if self.q is not None else "raw")

    def trace(self, **masks) -> AttentionTrace:
        if self.weights is not None:
            return trace_attention(self.x, self.weights, scale=self.scale, **masks)
        if self.q is not None:
            return trace_qkv(self.q, self.k, self.v, scale=self.scale, **masks)
        return trace_qkv(self.x, self.x, self.x, scale=self.scale, **masks)


def _three_inputs() -> Preset:
    x = np.array([[1, 0, 1, 0], [0, 2, 0, 2], [1, 1, 1, 1]], dtype=np.float64)
    w_key = [[0, 0, 1], [1, 1, 0], [0, 1, 0], [1, 1, 0]]
    w_query = [[1, 0, 1], [1, 0, 0], [0, 0, 1], [0, 1, 1]]
    w_value = [[0, 2, 0], [0, 3, 0], [1, 0, 3], [1, 1, 0]]
    w = MultiHeadWeights(np.array([w_query], float), np.array([w_key], float),
                         np.array([w_value], float), np.eye(3))
    rounded = np.array([[0.0, 0.5, 0.5], [0.0, 1.0, 0.0], [0.0, 0.9, 0.1]])
    return Preset(
        name="three_inputs", tutorial="003 Self-Attention 机制和代码",
        tokens=["Input 1", "Input 2", "Input 3"], x=x, weights=w, scale=1.0,
        side_notes={"rounded_weights": (Message("preset.three_inputs.rounded_note"), rounded)})


def _two_queries() -> Preset:
    return Preset(
        name="two_queries", tutorial="002 Attention 注意力机制", tokens=["query 1", "query 2"],
        tokens_k=["key 1", "key 2"],
        q=np.array([[1.0, 0, 1], [0, 1, 1]]), k=np.array([[0.0, 0, 1], [0, 1, 1]]),
        v=np.array([[1.0, 2], [3, 4]]))


def _thinking_machines() -> Preset:
    tokens = ["Thinking", "Machines"]
    return Preset(
        name="thinking_machines", tutorial="000 图解Transformer / 002 Attention 注意力机制",
        tokens=tokens, x=embed_tokens(tokens, 512), weights=MultiHeadWeights.random(512, 8, seed=0))


def _zao_shang_hao() -> Preset:
    # Chosen so that softmax(X Xᵀ)'s first row is [0.40, 0.40, 0.20] as in the tutorial:
    # 早·早 = 早·上 = 0.5 and 早·好 = −0.2, so the weights are 1 : 1 : e^(−0.7) ≈ 1 : 1 : 0.5.
    x = np.array([[0.5, 0.5], [0.6, 0.4], [0.1, -0.5]])
    return Preset(
        name="zao_shang_hao", tutorial="001 超详细图解Self-Attention", tokens=tokenize("早上好"),
        x=x, scale=1.0)


def _tied_qk() -> Preset:
    rng = np.random.default_rng(4)
    x = rng.random((5, 10))                                       # like torch.rand(5, 10)
    w_q, w_k, w_v = (rng.random((1, 10, 8)) for _ in range(3))
    w_o = np.eye(8)
    tied = MultiHeadWeights(w_q, w_q, w_v, w_o)
    return Preset(
        name="tied_qk", tutorial="004 为什么Q和K使用不同的权重矩阵",
        tokens=[f"x{i + 1}" for i in range(5)], x=x, weights=tied,
        alt_weights=MultiHeadWeights(w_q, w_k, w_v, w_o))


def _it() -> Preset:
    sentence = "The animal didn't cross the street because it was too tired"
    tokens = tokenize(sentence)
    return Preset(
        name="it", tutorial="000 图解Transformer", tokens=tokens, sentence=sentence,
        x=embed_tokens(tokens, 64), weights=MultiHeadWeights.random(64, 8, seed=0))


_BUILDERS = {"three_inputs": _three_inputs, "two_queries": _two_queries,
             "thinking_machines": _thinking_machines, "zao_shang_hao": _zao_shang_hao,
             "tied_qk": _tied_qk, "it": _it}

PRESET_NAMES = tuple(_BUILDERS)


@lru_cache(maxsize=len(_BUILDERS))
def load_preset(name: str) -> Preset:
    """The preset called `name` (one of PRESET_NAMES)."""
    if name not in _BUILDERS:
        raise AttnvizInputError("error.preset.unknown", name=repr(name), names=", ".join(PRESET_NAMES))
    return _BUILDERS[name]()


def presets() -> list[Preset]:
    return [load_preset(n) for n in PRESET_NAMES]
