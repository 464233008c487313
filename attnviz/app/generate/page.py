"""Generate: SmolLM2 continues a prompt one token at a time. The next-token probabilities, then
each new token's attention row in every head of a layer, the weight on the first token (the
attention sink) and the KV cache growing: keys and values appended, never recomputed."""

import streamlit as st

from attnviz.i18n import t
from attnviz.models.decoder import MODEL_NAME
from attnviz.app.generate import generate_view
from attnviz.app.shared import model_loading, state


def render() -> None:
    """The page (its file in pages/ calls this; `attnviz app` registers it)."""
    state.init()
    st.title(t("generate.title"))
    m = model_loading.decoder()
    st.caption(t("generate.caption", model=MODEL_NAME, layers=m.num_layers,
                 heads=m.num_heads, kv_heads=m.num_kv_heads))

    prompt = generate_view.prompt(m)           # (text, chat)
    if prompt is None:
        st.stop()
    generate_view.prompt_tokens(m, *prompt)
    generate_view.next_token_bars(*prompt)

    st.subheader(t("generate.subheader"))
    temperature, seed, _ = generate_view.controls()
    gen = generate_view.current(*prompt, temperature, seed) \
        or generate_view.from_link(m, *prompt, temperature, seed)
    if gen is None:
        generate_view.link_notice(*prompt, temperature, seed)
    gen = generate_view.buttons(m, *prompt, temperature, seed, gen)
    if gen is None:
        st.info(t("generate.press", n=generate_view.MAX_NEW_TOKENS))
        st.stop()

    generate_view.generated_text(gen)
    st.divider()
    number = generate_view.step_picker(gen)
    generate_view.step_view(m, gen, number)
