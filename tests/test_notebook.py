"""A notebook citizen (issue 20 item 5): a trace's repr fits a screen and its HTML renders
escaped; the public API has type hints; the steps under TransformerLens's hook names."""

import html.parser
import importlib
import inspect
import pydoc
import re

import numpy as np
import pytest

import attnviz
from attnviz.core.errors import AttnvizInputError
from attnviz.core.hook_names import HOOK_NAMES


def seven_tokens(**kw):
    x = attnviz.embed_tokens(attnviz.tokenize("the cat sat on the warm mat"), d_model=8)
    assert len(x) == 7
    return attnviz.trace_attention(x, attnviz.MultiHeadWeights.random(8, 2, seed=0, bias=True),
                                   **kw)


# ---- repr ---------------------------------------------------------------------------------------

def test_the_repr_of_a_7_token_trace_is_under_1_kb_and_names_each_steps_shape():
    """repr(t) was the dataclass's: every array printed, 190 kB for 7 tokens."""
    t = seven_tokens(causal=True)
    r = repr(t)
    assert len(r.encode("utf-8")) < 1000, len(r)
    assert r.startswith("AttentionTrace(heads=2, n_q=7, n_k=7, d_k=4, d_v=4, scale=0.5, "
                        "mask=bool")
    lines = r.splitlines()[1:]
    assert [line.split()[0] for line in lines] == [s.name for s in t.steps]
    expected = {"x": (7, 8), "q": (2, 7, 4), "k": (2, 7, 4), "v": (2, 7, 4),
                "scores": (2, 7, 7), "masked_scores": (2, 7, 7), "weights": (2, 7, 7),
                "weighted_values": (2, 7, 7, 4), "z": (2, 7, 4), "concat": (7, 8),
                "output": (7, 8)}
    for line in lines:
        name = line.split()[0]
        if name in expected:
            assert str(expected[name]) in line, line
    assert "0." not in r.split("\n", 1)[1], "no numbers of the arrays"
    assert len(repr(t.steps[1])) < 100 and "(2, 7, 4)" in repr(t.steps[1])


class _Table(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags, self.cells, self._in = [], [], None

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        if tag in ("td", "li"):
            self._in = tag

    def handle_endtag(self, tag):
        if tag == self._in:
            self._in = None

    def handle_data(self, data):
        if self._in:
            self.cells.append(data)


def test_the_html_repr_is_a_small_table_with_every_text_escaped():
    t = seven_tokens()
    why = "<script>alert('x')</script> & <b>bold</b>"
    given = attnviz.core.engine.with_weights(t, t.weights, why=why)
    out = given._repr_html_()
    assert len(out.encode("utf-8")) < 4000
    assert "<script>" not in out and "<b>bold" not in out
    assert "&lt;script&gt;" in out and "&amp;" in out
    parsed = _Table()
    parsed.feed(out)
    assert "script" not in parsed.tags and "b" in parsed.tags        # <b>AttentionTrace</b> only
    rows = parsed.tags.count("tr") - 1                               # the header row
    assert rows == len(t.steps)
    assert "(2, 7, 7, 4)" in parsed.cells and "weighted_values" in parsed.cells


# ---- the top-level names ------------------------------------------------------------------------

# SPEC.md's public API (tests outside the project call these names) and what the README and
# docs/python.md show: nothing else, no helper of the package's own __init__
PUBLIC = {"MultiHeadWeights", "trace_attention", "trace_qkv", "AttentionTrace", "tokenize",
          "embed_tokens", "sinusoidal_positions", "parse_matrix", "report_html",
          "PretrainedModel", "attention_rollout", "head_stats", "diff", "toy", "DecoderModel",
          "AttnvizInputError", "attention", "load_preset", "presets", "figures", "__version__",
          "head_atlas", "HeadAtlas"}


def test_the_top_level_names_are_the_public_api_each_with_its_line_in_the_docstring():
    assert set(dir(attnviz)) == PUBLIC
    for name in PUBLIC - {"__version__"}:
        assert getattr(attnviz, name) is not None
        assert re.search(rf"^    (\w+, )?{name}(, \w+)? {{2,}}\S", attnviz.__doc__, re.M), name
    assert attnviz.toy is importlib.import_module("attnviz.models.trainer.toy")   # the real modules
    assert attnviz.figures is importlib.import_module("attnviz.plot.figures")


def test_help_attnviz_is_a_screenful():
    """It was 993 lines: every class re-exported here documented in full."""
    text = pydoc.render_doc(attnviz, renderer=pydoc.plaintext)
    assert len(text.splitlines()) < 100
    assert "trace_attention" in text and "PACKAGE CONTENTS" in text


# ---- type hints ---------------------------------------------------------------------------------

def _public_functions():
    for name in dir(attnviz):
        if name in ("figures", "toy", "__version__", "DecoderModel"):
            continue
        obj = getattr(attnviz, name)
        if inspect.isclass(obj):
            for attr, value in vars(obj).items():
                if attr.startswith("_") and attr != "__init__":
                    continue
                if isinstance(value, (staticmethod, classmethod)):
                    value = value.__func__
                if isinstance(value, property):
                    value = value.fget
                if inspect.isfunction(value) and not (attr == "__init__"
                                                      and "dataclass" in str(value.__qualname__)):
                    yield f"{name}.{attr}", value
        elif inspect.isfunction(obj):
            yield name, obj


def test_every_public_function_has_type_hints():
    missing = []
    for name, f in _public_functions():
        sig = inspect.signature(f)
        for p, q in sig.parameters.items():
            if p not in ("self", "cls") and q.kind not in (q.VAR_KEYWORD, q.VAR_POSITIONAL) \
                    and q.annotation is inspect.Parameter.empty:
                missing.append(f"{name}({p})")
        if sig.return_annotation is inspect.Signature.empty and not name.endswith("__init__"):
            missing.append(f"{name} → ?")
    assert missing == []


def test_the_decoders_public_methods_have_type_hints():
    from attnviz.models.decoders.decoder import DecoderModel
    missing = [f"{k}({p})" for k, v in vars(DecoderModel).items()
               if inspect.isfunction(v) and not k.startswith("_")
               for p, q in inspect.signature(v).parameters.items()
               if p != "self" and q.annotation is inspect.Parameter.empty]
    assert missing == []


# ---- TransformerLens's names ---------------------------------------------------------------------

def softmax(s):
    e = np.exp(s - s.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def test_the_steps_under_transformer_lens_names_in_its_axis_order():
    """Computed here from x and the weights, the way TransformerLens's Attention does (its
    hooks' comments give the shapes, batch first): q, k, v, z as (pos, head, d_head); the
    scores (head, query_pos, key_pos) already divided by √d_head and masked with −inf; the
    per-head result z_h W_O,h (pos, head, d_model); attn_out = Σ_h result + b_O."""
    t = seven_tokens(causal=True)
    w, x = t.params, t.x
    q = np.einsum("pm,hmd->phd", x, w.w_q) + w.b_q                 # (pos, head, d_head)
    k = np.einsum("pm,hmd->phd", x, w.w_k) + w.b_k
    v = np.einsum("pm,hmd->phd", x, w.w_v) + w.b_v
    scores = np.einsum("qhd,khd->hqk", q, k) / np.sqrt(4)
    scores[:, np.triu(np.ones((7, 7), bool), 1)] = -np.inf
    pattern = softmax(scores)
    z = np.einsum("hqk,khd->qhd", pattern, v)
    w_o = w.w_o.reshape(2, 4, 8)                                   # (head, d_head, d_model)
    result = np.einsum("qhd,hdm->qhm", z, w_o)
    out = result.sum(1) + w.b_o
    got = t.to_transformer_lens_names(layer=3)
    assert list(got) == ["blocks.3.attn.hook_q", "blocks.3.attn.hook_k", "blocks.3.attn.hook_v",
                         "blocks.3.attn.hook_attn_scores", "blocks.3.attn.hook_pattern",
                         "blocks.3.attn.hook_z", "blocks.3.attn.hook_result",
                         "blocks.3.hook_attn_out"]
    for name, expected in [("attn.hook_q", q), ("attn.hook_k", k), ("attn.hook_v", v),
                           ("attn.hook_attn_scores", scores), ("attn.hook_pattern", pattern),
                           ("attn.hook_z", z), ("attn.hook_result", result),
                           ("hook_attn_out", out)]:
        np.testing.assert_allclose(got[f"blocks.3.{name}"], expected, rtol=1e-12, atol=1e-12,
                                   err_msg=name)
    assert np.isneginf(got["blocks.3.attn.hook_attn_scores"][:, 0, 1:]).all()


def test_grouped_query_and_rotary_traces_map_kv_heads_once_and_the_rotations():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(5, 8))
    w = attnviz.MultiHeadWeights.random(8, 4, d_k=2, d_v=2, num_kv_heads=2, seed=0)
    t = attnviz.trace_attention(x, w, rope=10000.0, causal=True)
    got = t.to_transformer_lens_names()
    assert got["blocks.0.attn.hook_q"].shape == (5, 4, 2)
    assert got["blocks.0.attn.hook_k"].shape == (5, 2, 2)          # two key/value heads
    np.testing.assert_allclose(got["blocks.0.attn.hook_k"][:, 1], x @ w.w_k[1], rtol=1e-13)
    np.testing.assert_array_equal(got["blocks.0.attn.hook_rot_q"], t.q_rotated.transpose(1, 0, 2))
    assert got["blocks.0.attn.hook_rot_k"].shape == (5, 2, 2)
    qkv_only = attnviz.trace_qkv(t.q, t.k, t.v).to_transformer_lens_names()
    assert "blocks.0.attn.hook_result" not in qkv_only and "blocks.0.hook_attn_out" not in qkv_only
    with pytest.raises(AttnvizInputError) as caught:
        t.to_transformer_lens_names(layer=-1)
    assert caught.value.msg_id == "error.whole_number" and caught.value.params["name"] == "layer"


def test_the_table_of_names_is_documented_once_in_the_module_and_the_python_guide():
    import attnviz.core.hook_names as hn
    for step, hook in HOOK_NAMES.items():
        assert re.search(rf"``{hook}``", hn.__doc__), hook
    guide = open(attnviz.__file__.replace("attnviz/__init__.py", "docs/python.md"),
                 encoding="utf-8").read()
    assert "to_transformer_lens_names" in guide and "hook_attn_scores" in guide
