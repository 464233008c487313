"""Generate: the sidebar's language model (SmolLM2, Gemma 3, a server's own GGUF) continues a prompt one token at a time. The next-token probabilities, then
each new token's attention row in every head of a layer, the weight on the first token (the
attention sink) and the KV cache growing: keys and values appended, never recomputed."""

import streamlit as st

from attnviz.i18n import t
from attnviz.app.generate import generate_view
from attnviz.app.generate.generate_state import chat_offered
from attnviz.app.shared import model_loading, state
from attnviz.app.shared.model_words import named
from attnviz.models.decoders.gguf_llama import file_type
from attnviz.app.sidebar.model_choice import language_model


def render() -> None:
    """The page (its file in pages/ calls this; `attnviz app` registers it)."""
    state.init()
    st.title(t("generate.title"))
    entry = language_model()
    m = model_loading.decoder(entry)
    st.caption(t("generate.caption", model=named(entry), layers=m.num_layers,
                 heads=m.num_heads, kv_heads=m.num_kv_heads, quant=file_type(str(m.path))))

    prompt = generate_view.prompt(m, chat_offered(entry))     # (text, chat)
    if prompt is None:
        st.stop()
    generate_view.prompt_tokens(m, *prompt)
    generate_view.next_token_bars(m, *prompt)

    st.subheader(t("generate.subheader"))
    temperature, seed, _ = generate_view.controls()
    recipe = (entry.name, *prompt, temperature, seed)
    gen = generate_view.current(*recipe) or generate_view.from_link(m, *recipe)
    if gen is None:
        generate_view.link_notice(*recipe)
    gen = generate_view.buttons(m, *recipe, gen)
    if gen is None:
        st.info(t("generate.press", n=generate_view.MAX_NEW_TOKENS))
        st.stop()

    generate_view.generated_text(gen)
    st.divider()
    number = generate_view.step_picker(gen)
    generate_view.step_view(m, gen, number)
