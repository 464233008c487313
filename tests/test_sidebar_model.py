"""The sidebar of the pages that run the chosen pretrained model (Pretrained model, Read the
model): what it says about the model follows Settings.model (issue 21/22). With SmolLM2 chosen,
nothing in it describes all-MiniLM-L6-v2 (WordPiece tokens, [CLS] and [SEP]) except the model
choice's own help, which compares the two; in both languages."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from attnviz.app import main
from attnviz.i18n import use_language
from tests.apptest_helpers import shared_components
from tests.i18n_walker import visible_texts

MINILM_ONLY = ("all-MiniLM-L6-v2", "WordPiece", "[CLS]", "[SEP]")


def real_model_sidebar():
    from attnviz.app.sidebar import panel

    panel.render(real_model=True)


def sidebar_texts(model: str, lang: str) -> list:
    at = shared_components(AppTest.from_function(real_model_sidebar, default_timeout=240))
    at.session_state["model"] = model
    at.session_state["lang"] = lang
    with use_language(lang):
        at.run()
    assert not at.exception, at.exception
    return visible_texts(at, at.sidebar)


def test_the_read_the_model_page_has_the_real_model_sidebar():
    assert {"reading", "pretrained"} <= main.REAL_MODEL


@pytest.mark.slow
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_with_smollm2_chosen_the_sidebar_describes_smollm2(lang):
    texts = sidebar_texts("smollm2", lang)
    choice_help = [s for s in texts if s.where == "selectbox.help" and "SmolLM2" in s.text
                   and "all-MiniLM-L6-v2" in s.text]
    assert len(choice_help) == 1                    # the model choice compares the two
    about_minilm = [s for s in texts if s not in choice_help and s.where != "selectbox.options"
                    and any(word in s.text for word in MINILM_ONLY)]
    assert about_minilm == []
    captions = [s.text for s in texts if s.where == "caption.body"]
    assert any("SmolLM2-135M-Instruct" in c for c in captions), captions
    helps = {s.where: s.text for s in texts if s.where in ("text_input.help",)}
    assert "SmolLM2-135M-Instruct" in helps["text_input.help"]


@pytest.mark.slow
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_with_minilm_chosen_the_sidebar_describes_minilm(lang):
    texts = sidebar_texts("minilm", lang)
    captions = [s.text for s in texts if s.where == "caption.body"]
    assert any("all-MiniLM-L6-v2" in c for c in captions), captions
    assert not any("SmolLM2-135M-Instruct" in c for c in captions)
    assert any("WordPiece" in s.text for s in texts if s.where == "text_input.help")
    assert any("[CLS]" in s.text for s in texts if s.where == "number_input.help")
