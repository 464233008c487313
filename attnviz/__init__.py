"""attnviz: every intermediate of (multi-head) self-attention, exact and ready to show.

    import attnviz
    w = attnviz.MultiHeadWeights.random(d_model=8, num_heads=2, seed=0)
    x = attnviz.embed_tokens(attnviz.tokenize("Thinking Machines"), d_model=8)
    t = attnviz.trace_attention(x, w)
    t.weights          # (H, n_q, n_k), each row sums to 1

The names here (the public API of SPEC.md; row vectors, Q = X @ W_Q; axes (head, query, key,
feature)):

    MultiHeadWeights       W_Q, W_K, W_V, W_O and biases; .random, .from_torch, .from_npz
    trace_attention        x (and a context) through the weights: an AttentionTrace
    trace_qkv              Q, K, V entered directly: an AttentionTrace
    AttentionTrace         every intermediate, named and shaped; .steps, .to_npz, .to_json
    attention              the formula written plainly, which the fast path is tested against
    tokenize               text → tokens (words, punctuation marks, CJK characters)
    embed_tokens           tokens → (n, d_model), the same vectors on any machine
    sinusoidal_positions   the original sin/cos positional encoding, (n, d_model)
    parse_matrix           matrix text or JSON → a 2-D array, errors naming row and column
    AttnvizInputError      what every bad argument raises (a ValueError)
    load_preset, presets   the tutorials' worked examples: one by name, all of them
    diff                   two traces, step by step: Δ and max |Δ|
    report_html            a trace as one self-contained HTML page
    PretrainedModel        all-MiniLM-L6-v2, traced layer by layer
    attention_rollout      a model's attentions rolled out over its layers
    head_stats             every head's statistics, as a pandas table
    DecoderModel           SmolLM2-135M-Instruct from its GGUF file (loaded on first use)
    head_atlas, HeadAtlas  every head of a decoder over a corpus (loaded on first use)
    figures                the plotly figures, attnviz.plot.figures (loaded on first use)
    toy                    train a tiny transformer, attnviz.models.trainer.toy (torch, first use)

Everything else is at its real path, in the folder of its layer (docs/architecture.md):
``attnviz.i18n`` ← ``attnviz.core`` (numpy) ← ``describe``, ``models``, ``tutorials`` ←
``plot`` (plotly) ← ``io`` ← ``app`` (streamlit). ``import attnviz`` loads the numpy core, the
steps' texts and the files' writers, never plotly, streamlit, torch or pandas, and starts no
thread.
"""

# The steps' titles, formulas and explanations (describe) and the trace's files (io.files) plug
# into the core when imported, so every trace describes and saves itself without the core
# importing them.
from attnviz import describe as _describe
from attnviz.io import files as _files
from attnviz.core.diff import diff as diff
from attnviz.core.engine import AttentionTrace as AttentionTrace
from attnviz.core.engine import attention as attention
from attnviz.core.engine import trace_attention as trace_attention
from attnviz.core.engine import trace_qkv as trace_qkv
from attnviz.core.errors import AttnvizInputError as AttnvizInputError
from attnviz.core.inputs import embed_tokens as embed_tokens
from attnviz.core.inputs import sinusoidal_positions as sinusoidal_positions
from attnviz.core.inputs import tokenize as tokenize
from attnviz.core.matrix_text import parse_matrix as parse_matrix
from attnviz.core.reading import attention_rollout as attention_rollout
from attnviz.core.reading import head_stats as head_stats
from attnviz.core.weights import MultiHeadWeights as MultiHeadWeights
from attnviz.io.report import report_html as report_html
from attnviz.models.encoder.pretrained import PretrainedModel as PretrainedModel
from attnviz.tutorials.presets import load_preset as load_preset
from attnviz.tutorials.presets import presets as presets

del _describe, _files

__version__ = "0.2.0"

_ON_FIRST_USE = {"figures": "attnviz.plot.figures", "toy": "attnviz.models.trainer.toy",
                 "DecoderModel": "attnviz.models.decoders.decoder",
                 "head_atlas": "attnviz.io.head_atlas", "HeadAtlas": "attnviz.io.head_atlas"}
_NAMES = ("AttentionTrace", "AttnvizInputError", "DecoderModel", "HeadAtlas",
          "MultiHeadWeights", "PretrainedModel", "attention", "attention_rollout", "diff",
          "embed_tokens", "figures", "head_atlas", "head_stats", "load_preset", "parse_matrix",
          "presets", "report_html", "sinusoidal_positions", "tokenize", "toy", "trace_attention", "trace_qkv",
          "__version__")


def __getattr__(name: str):
    """``figures``, ``toy``, ``DecoderModel`` and the head atlas on first use: plotly is loaded
    only by those who draw, torch only by those who train, the decoder's readers only by those
    who run it."""
    if name not in _ON_FIRST_USE:
        raise AttributeError(f"module 'attnviz' has no attribute {name!r}")
    from importlib import import_module

    module = import_module(_ON_FIRST_USE[name])
    value = getattr(module, name) if name in ("DecoderModel", "head_atlas", "HeadAtlas") \
        else module
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The names above (those loaded on first use included), no helpers."""
    return sorted(_NAMES)
