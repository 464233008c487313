"""Head atlas: every head of the sidebar's language model over a corpus, as points on two
metrics (coloured by layer or cluster), then one head opened: its top examples, a row from
each decile, its joint query/key map (PCA, or t-SNE on the server's queue), its related heads
(attnviz.app.atlas.atlas_view)."""

import streamlit as st

from attnviz.app.atlas import atlas_view
from attnviz.app.shared import links, model_loading, state
from attnviz.app.shared.model_words import named
from attnviz.app.shared.text import code
from attnviz.app.sidebar.model_choice import language_model
from attnviz.i18n import t


def render() -> None:
    """The page (its file in pages/ calls this; `attnviz app` registers it)."""
    state.init()
    st.title(t("nav.atlas"))
    entry = language_model()
    m = model_loading.decoder(entry)
    st.caption(t("atlas.caption", model=named(entry), layers=m.num_layers, heads=m.num_heads,
                 docs=code("docs/atlas.md")))
    texts = atlas_view.corpus()
    links.write()           # the corpus's name in the link now: the page may stop below
    if not texts:
        st.info(t("atlas.empty"))
        st.stop()
    corpus_id = atlas_view.corpus_hash(texts)
    read, tokens = atlas_view.counts(m, entry.name, corpus_id, texts)
    st.markdown(t("atlas.count", texts=len(texts), read=read, tokens=tokens,
                  window=m.max_tokens))
    if not read:
        st.info(t("atlas.none_read"))
        st.stop()
    key = atlas_view.atlas_key(entry, m, corpus_id)
    built = atlas_view.build(m, key, texts)
    if built is None:
        st.stop()
    st.divider()
    layer, head = atlas_view.heads(built)
    atlas_view.examples(m, built, layer, head, entry.name)
    atlas_view.deciles(m, built, layer, head, entry.name)
    atlas_view.qk_map(built, key, layer, head)
    atlas_view.grid(built, key, layer, head)
    atlas_view.related(built, layer, head)
    atlas_view.downloads(built, corpus_id)
