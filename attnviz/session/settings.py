"""What the sidebar asks for: `Settings` (every setting, its default, its range, read from the
session or a file), `ToyChoice` (the Train page's run, handed beside the settings), the bounds of
the whole-number settings and of a model's layers, and the configuration the user's edits are
kept for (`weights_signature`). No streamlit."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from attnviz.core.errors import AttnvizInputError
from attnviz.core.inputs import DEFAULT_MAX_TOKENS, MAX_D_MODEL, MAX_HEADS, MAX_TOKENS
from attnviz.core.modes import Mode
from attnviz.core.weights import INIT_SCHEMES
from attnviz.models.catalogue import registry
from attnviz.tutorials.presets import PRESET_NAMES

if TYPE_CHECKING:                     # a ToyRun exists only once torch is loaded
    from attnviz.models.trainer.toy import ToyRun


TOY_MODE = Mode.TOY.value
MODES = tuple(m.value for m in Mode)    # the values a widget, a link and a file carry
DEFAULT_SENTENCE = "The animal didn't cross the street because it was too tired"
MAX_SEED = 2**31 - 1
ROPE_BASES = (10000, 100000)          # the rotary bases offered (Llama 2: 10⁴, SmolLM2: 10⁵)


# the allowed range of each whole-number setting (the sidebar's and a link's bounds); the
# layer's follows the registered models: bounds("layer")
BOUNDS = {"d_model": (1, MAX_D_MODEL), "num_heads": (1, MAX_HEADS), "d_k": (0, MAX_D_MODEL),
          "seed": (0, MAX_SEED), "max_tokens": (1, MAX_TOKENS),
          "kv_heads": (0, MAX_HEADS), "rope_base": (min(ROPE_BASES), max(ROPE_BASES))}


def bounds(name: str) -> tuple[int, int] | None:
    """The allowed range of whole-number setting `name` (None: not one). The layer's: up to
    the last layer of the registered model with the most (each model's own: layer_bounds)."""
    if name == "layer":
        return 0, max((n for n in map(_layers_or_none, registry.ENTRIES) if n), default=1) - 1
    return BOUNDS.get(name)


def _layers_or_none(entry: registry.ModelEntry) -> int | None:
    try:
        return entry.num_layers
    except AttnvizInputError:            # not installed: its pages say so
        return None


def layer_bounds(model: str) -> tuple[int, int] | None:
    """The layers of pretrained model `model` (one of registry.NAMES): 0 … its layers − 1,
    read from its config; None when that cannot be read (the model is not installed: the
    page that runs it says so)."""
    layers = _layers_or_none(registry.get(model))
    return None if layers is None else (0, layers - 1)


def check_layer(s: "Settings") -> None:
    """AttnvizInputError unless `s.layer` is a layer of `s.model` (the model's own error when
    its config cannot be read)."""
    entry = s.model_entry
    high = entry.num_layers - 1
    if not 0 <= s.layer <= high:
        raise AttnvizInputError("error.settings.layer_for_model", low=0, high=high,
                                model=entry.shown, layer=s.layer)


def kv_head_counts(heads: int) -> list[int]:
    """The numbers of key/value heads `heads` query heads can share: its divisors."""
    return [d for d in range(1, heads + 1) if heads % d == 0] if heads >= 1 else []


def rope_base_of(s: "Settings") -> float | None:
    """The rotary base the synthetic inputs rotate Q and K with (None: rotary positions off)."""
    return float(s.rope_base) if s.rope else None


# the settings only the toy inputs read (a sentence's random weights, a matrix, a preset): a
# pretrained model's view is made without them
TOY_ONLY = ("preset", "d_model", "num_heads", "d_k", "init", "seed", "bias", "rounded",
            "positional", "x_text", "q_text", "k_text", "v_text", "kv_heads", "rope",
            "rope_base")


@dataclass(frozen=True)
class Settings:
    """What the sidebar asks for. Defaults give a newcomer heatmaps at once."""

    mode: str = Mode.SENTENCE.value
    sentence: str = DEFAULT_SENTENCE
    preset: str = "three_inputs"
    d_model: int = 16
    num_heads: int = 4
    d_k: int = 0                      # 0 = d_model // num_heads
    init: str = "xavier"
    seed: int = 0
    bias: bool = False
    scaled: bool = True
    rounded: bool = False             # tutorial 003's rounded weights instead of the softmax
    causal: bool = False
    positional: bool = False
    max_tokens: int = DEFAULT_MAX_TOKENS
    layer: int = 0                    # the pretrained or toy model's layer the pages show
    x_text: str = "1, 0, 1, 0\n0, 2, 0, 2\n1, 1, 1, 1"
    q_text: str = "1, 0, 1\n0, 1, 1"
    k_text: str = "0, 0, 1\n0, 1, 1"
    v_text: str = "1, 2\n3, 4"
    model: str = registry.DEFAULT     # the pretrained model: one of registry.NAMES
    kv_heads: int = 0                 # key/value heads (grouped-query); 0 = as many as heads
    rope: bool = False                # rotary positions on Q and K (synthetic inputs)
    rope_base: int = 10000            # their base: one of ROPE_BASES

    @classmethod
    def from_mapping(cls, values) -> "Settings":
        """Settings from a mapping such as st.session_state; absent or unusable values fall back
        to the defaults (a page must work from seeded state alone)."""
        base = cls()
        picked = {}
        for name, default in base.__dict__.items():
            if name not in values:
                continue
            value = values[name]
            if isinstance(default, bool):
                ok = isinstance(value, bool)
            elif isinstance(default, int):
                ok = isinstance(value, (int, np.integer)) and not isinstance(value, bool)
            else:
                ok = isinstance(value, str)
            if ok:
                picked[name] = value
        s = replace(base, **picked)
        if s.mode not in MODES:
            s = replace(s, mode=base.mode)
        if s.preset not in PRESET_NAMES:
            s = replace(s, preset=base.preset)
        if s.init not in INIT_SCHEMES:
            s = replace(s, init=base.init)
        if s.model not in registry.NAMES:
            s = replace(s, model=base.model)
        if s.rope_base not in ROPE_BASES:
            s = replace(s, rope_base=base.rope_base)
        return s

    @property
    def scale(self) -> float | None:
        return None if self.scaled else 1.0

    @property
    def model_entry(self) -> registry.ModelEntry:
        """The pretrained model's entry: what pages ask of it (causal, its views, sizes)."""
        return registry.get(self.model)

    @property
    def language_model_entry(self) -> registry.ModelEntry:
        """The language model a page that needs one runs (Generate): the chosen model where it
        has a language-model head, else the registry's first that has one."""
        entry = self.model_entry
        return entry if entry.lm_head else registry.language_model()

    def to_dict(self) -> dict:
        """The settings by name (str, int or bool values) that made the view: what an exported
        file carries so that `view_from_file` rebuilds it. A pretrained model's view leaves out
        the toy inputs' settings it never reads (``TOY_ONLY``: the sidebar's d_model, heads,
        weights, matrices), and a causal model's is causal, as its trace is; every setting
        left out keeps its default when the file is read."""
        values = dict(self.__dict__)
        if self.mode == Mode.PRETRAINED:
            for name in TOY_ONLY:
                del values[name]
            if self.model_entry.causal:
                values["causal"] = True
        return values

    @classmethod
    def from_dict(cls, values) -> "Settings":
        """The inverse of `to_dict`, strict (for files): a setting this attnviz does not have,
        a value of the wrong type, or an unknown mode, preset or initialisation is an
        AttnvizInputError naming it; a setting the file lacks (an older file) keeps its
        default."""
        if not isinstance(values, dict):
            raise AttnvizInputError("error.settings.not_a_mapping")
        known = cls().__dict__
        unknown = sorted(str(n)[:40] for n in values if n not in known)
        if unknown:
            raise AttnvizInputError("error.settings.unknown", count=len(unknown),
                                    names=", ".join(unknown))
        for name, value in values.items():
            if type(value) is not type(known[name]):       # bool is not an int here
                raise AttnvizInputError("error.settings.type", name=name,
                                        type=type(known[name]).__name__,
                                        value=repr(str(value)[:40]))
            low, high = bounds(name) or (value, value)
            if not low <= value <= high:
                raise AttnvizInputError("error.settings.range", name=name, low=low, high=high,
                                        value=value)
        for name, allowed in (("mode", MODES), ("preset", PRESET_NAMES),
                              ("init", INIT_SCHEMES), ("model", registry.NAMES),
                              ("rope_base", ROPE_BASES)):
            if name in values and values[name] not in allowed:
                raise AttnvizInputError("error.settings.value", name=name,
                                        value=repr(str(values[name])[:40]))
        s = replace(cls(), **values)
        if layer_bounds(s.model) is not None:      # a model not installed: its page says so
            check_layer(s)
        return s


@dataclass(frozen=True, eq=False)
class ToyChoice:
    """The Train page's run as the pages show it: not a setting (a trained run cannot travel in
    a link), so the app hands it to `build_view` beside the settings."""

    run: "ToyRun"
    step: int                         # a checkpoint step of the run
    example: int                      # index into run.test_inputs

    @property
    def sequence(self) -> np.ndarray:
        """(n,) the held-out sequence shown."""
        return self.run.test_inputs[self.example]

    @property
    def run_id(self) -> str:
        """Names the run's weights: its configuration (seed included: training is
        deterministic) and the steps it did (a stopped run did fewer)."""
        text = repr((self.run.config, self.run.steps))
        return hashlib.blake2s(text.encode(), digest_size=6).hexdigest()


def weights_signature(s: Settings, toy: ToyChoice | None = None) -> str:
    """Edits are kept per configuration: returning to it brings them back."""
    if s.mode == TOY_MODE:
        return f"toy:{toy.run_id}:{s.layer}:{toy.step}" if toy is not None else "toy:none"
    if s.mode == Mode.PRESET:
        return f"preset:{s.preset}"
    if s.mode == Mode.PRETRAINED:
        return f"pretrained:{s.model}:{s.layer}"
    grouped = f":kv{s.kv_heads}" if s.kv_heads not in (0, s.num_heads) else ""  # other shapes
    if s.mode == Mode.MATRIX_X:
        return f"matrix:{s.num_heads}:{s.d_k}:{s.init}:{s.seed}:{s.bias}{grouped}"
    return f"random:{s.d_model}:{s.num_heads}:{s.d_k}:{s.init}:{s.seed}:{s.bias}{grouped}"
