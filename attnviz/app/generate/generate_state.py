"""The Generate page's settings and its generation as the session holds them, read without
drawing anything: the page (``generate_view``) draws them, a link (``links``) carries them."""

from __future__ import annotations

import streamlit as st

from attnviz.app import keys
from attnviz.app.shared.text import MAX_PROMPT_CHARS
from attnviz.models.decoders.decoder import Generation
from attnviz.session.settings import Settings

DEFAULT_PROMPT = "The capital of France is"
MAX_NEW_TOKENS = 40                     # the page's bound on new tokens
SAMPLINGS = ("greedy", "sample")
TEMPERATURES = (0.1, 2.0)               # the temperature slider's ends
MAX_SEED = 2**31 - 1
# what a link may set (attnviz.app.shared.links clamps into these, with a notice)
LINK_BOUNDS = {keys.GEN_TEMPERATURE: TEMPERATURES, keys.GEN_SEED: (0, MAX_SEED),
               keys.GEN_COUNT: (1, MAX_NEW_TOKENS), keys.GEN_STEP: (1, MAX_NEW_TOKENS),
               keys.GEN_FROM_LINK: (0, MAX_NEW_TOKENS)}


def recipe() -> tuple[str, str, bool, float, int]:
    """(model, text, chat, temperature, seed) as the sidebar and the page's boxes hold them now
    (what ``current`` is asked with; model: the registry's name of the language model the page
    runs): a link carries the generation's length only while the page shows it."""
    state = st.session_state
    text = state.get(keys.GEN_PROMPT, DEFAULT_PROMPT)
    sampled = state.get(keys.GEN_SAMPLING) == "sample"
    entry = Settings.from_mapping(state).language_model_entry
    return (entry.name, text[:MAX_PROMPT_CHARS] if isinstance(text, str) else DEFAULT_PROMPT,
            bool(state.get(keys.GEN_CHAT, False)) and chat_offered(entry),
            float(state.get(keys.GEN_TEMPERATURE, 0.8)) if sampled else 0.0,
            int(state.get(keys.GEN_SEED, 0)) if sampled else 0)


def chat_offered(entry) -> bool:
    """Whether the page offers `entry`'s chat template (a base model, Gemma 3 270M, has none:
    its prompt is read as it is), from the registry alone: no model loaded."""
    return entry.chat_template

def current(model: str, text: str, chat: bool, temperature: float,
            seed: int) -> Generation | None:
    """The session's generation if it was made by this model from this prompt, temperature
    and seed."""
    kept = st.session_state.get(keys.GENERATE_RUN)
    if kept and kept["recipe"] == (model, text, chat, temperature, seed):
        return kept["generation"]
    return None
