"""A tuned lens (Belrose et al. 2023, "Eliciting Latent Predictions from Transformers with the
Tuned Lens") for SmolLM2: one affine translator per layer boundary, mapping that layer's
residual stream to where the last layer's would be, before the logit lens reads it.

    u(h) = h / √(mean(h²) + ε)                        the stream's direction (RMS 1, no gain)
    T_ℓ(h) = [u(h), 1] · A_ℓ                          A_ℓ (d_model + 1, d_model), ℓ = 0 … L − 1
    A_ℓ = argmin_A Σ_t ‖[u(h_ℓ,t), 1] A − u(h_L,t)‖² + λ ‖A‖²     over the training tokens t
    tuned lens(h_ℓ) = softmax(RMSNorm(T_ℓ(h_ℓ)) · g_final @ Eᵀ)     the logit lens's unembedding

The paper trains its translators by gradient descent on KL(last layer ‖ lens) over hundreds of
millions of tokens, on a GPU. Here each translator is fitted in closed form, by ridge regression
(λ = RIDGE · tokens), on text the model generates itself: TRAINING_PROMPTS (English, Chinese,
code) each continued by NEW_TOKENS sampled tokens (temperature 1, seeds 0 …), ~1,100 tokens, a
minute on one core; every position of those texts is a training token. Its KL is below the
logit lens's at every layer on text it never saw (tests/test_tuned_lens.py holds that with
transformers' hidden states). The last row needs no translator: it is the model's output.

The translators (30 × 577 × 576 float32, 40 MB) are kept on disk beside the converted model
(``attnviz.models.disk_cache``: written whole, read into memory and checked on every load,
fitted again when damaged, one process fitting while the others wait), so a server fits them
once.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from attnviz.core.arrays import readonly, whole_number
from attnviz.i18n import Message
from attnviz.models import disk_cache

__all__ = ["NEW_TOKENS", "RIDGE", "TRAINING_PROMPTS", "TunedLens", "TunedProgress", "can_keep",
           "fit", "kept", "load", "training_ids"]

TRAINING_PROMPTS = (
    "Once upon a time, in a small village,",
    "The history of science shows that",
    "In mathematics, a matrix is",
    "My favourite recipe for dinner is",
    "The train to London leaves at",
    "A good teacher always",
    "Scientists discovered that the ocean",
    "Dear friend, I am writing to tell you",
    "今天我们学习",
    "我最喜欢的季节是",
    "北京是一个",
    "def fibonacci(n):",
    "import numpy as np\n",
    "<html>\n<body>\n",
    "Question: What is the capital of France?\nAnswer:",
    "1, 2, 3, 4,",
)
NEW_TOKENS = 64            # sampled after each prompt (temperature 1, seed = the prompt's index)
RIDGE = 1e-2               # λ = RIDGE · tokens: each row of u(h) has mean square 1
FORMAT = 1                 # bump when the fit or the files change: the cache is made again
FILE = "translators.npy"
INFO = "training.json"
_DTYPE = np.float32


@dataclass(frozen=True)
class TunedProgress:
    """One stage of loading or fitting, for a progress indicator: "verifying", "damaged"
    (`reason`), "generating" (`done` of `total` training texts), "fitting" (`done` of `total`
    layers), "writing", "done"."""

    stage: str
    done: int = 0
    total: int = 0
    reason: Message | None = None

    @property
    def fraction(self) -> float:
        """The share done, 0 … 1: generating is most of the time."""
        if self.stage == "generating":
            return 0.9 * self.done / max(self.total, 1)
        if self.stage == "fitting":
            return 0.9 + 0.09 * self.done / max(self.total, 1)
        return {"writing": 0.99, "done": 1.0}.get(self.stage, 0.0)


@dataclass(frozen=True, eq=False)
class TunedLens:
    """The translators of one model: translators (L, d_model + 1, d_model) float32, row ℓ for
    the stream after ℓ layers (0: the embeddings); tokens: how many it was fitted on.
    outcome: "verified" (read from the cache), "fitted" (none there: fitted now and kept),
    "refitted" (a damaged copy, `reason` says how, fitted again) or "in_memory" (the cache
    cannot be written: fitted for this process only)."""

    translators: np.ndarray = field(repr=False)
    tokens: int
    eps: float
    outcome: str = "fitted"
    reason: Message | None = None

    @property
    def num_layers(self) -> int:
        return len(self.translators)

    def translate(self, layer: int, h: np.typing.ArrayLike) -> np.ndarray:
        """(…, d_model) float32: the stream h (…, d_model) after `layer` layers (0 … L) moved
        by its translator T_layer; the last layer's (L) as it is."""
        layer = whole_number(layer, "layer", low=0, high=self.num_layers)
        h = np.asarray(h, dtype=_DTYPE)
        if layer == self.num_layers:
            return h
        a = self.translators[layer]                                    # (d + 1, d)
        return (_unit(h, self.eps) @ a[:-1] + a[-1]).astype(_DTYPE)


def _unit(h: np.ndarray, eps: float) -> np.ndarray:
    """(…, d) float64: each row divided by its root mean square (RMSNorm without its gain)."""
    h = np.asarray(h, dtype=np.float64)
    return h / np.sqrt((h * h).mean(axis=-1, keepdims=True) + eps)


def fit(streams: np.ndarray, eps: float, ridge: float = RIDGE) -> np.ndarray:
    """(L, d + 1, d) float32 translators from the streams (L + 1, tokens, d) at every layer
    boundary of the training tokens (the last: the target): ridge regression of u(h_L) on
    [u(h_ℓ), 1], λ = ridge · tokens, solved by its normal equations."""
    *_, tokens, d = streams.shape
    target = _unit(streams[-1], eps)                                   # (t, d)
    penalty = ridge * tokens * np.eye(d + 1)
    out = np.empty((len(streams) - 1, d + 1, d), _DTYPE)
    for layer in range(len(streams) - 1):
        x = np.hstack([_unit(streams[layer], eps), np.ones((tokens, 1))])   # (t, d + 1)
        out[layer] = np.linalg.solve(x.T @ x + penalty, x.T @ target)
    return out


def training_ids(model, progress: Callable[[TunedProgress], None] | None = None) \
        -> list[np.ndarray]:
    """The training texts' ids: each of TRAINING_PROMPTS and NEW_TOKENS tokens the model
    samples after it (temperature 1, seed = the prompt's index, not stopped at its end token)."""
    tell = progress or (lambda stage: None)
    texts = []
    for i, prompt in enumerate(TRAINING_PROMPTS):
        tell(TunedProgress("generating", i, len(TRAINING_PROMPTS)))
        g = model.generate(prompt, max_new_tokens=NEW_TOKENS, temperature=1.0, seed=i,
                           stop_at_eos=False)
        texts.append(np.asarray(g.ids))
    return texts


def _train(model, progress: Callable[[TunedProgress], None]) -> tuple[np.ndarray, int]:
    from attnviz.models.readers.lens import layer_streams

    streams = np.concatenate([layer_streams(model, ids) for ids in training_ids(model, progress)],
                             axis=1)                                   # (L + 1, tokens, d)
    progress(TunedProgress("fitting", 0, model.num_layers))
    return fit(streams, model.config.rms_eps), streams.shape[1]


# ---- kept on disk -------------------------------------------------------------------------------

_LOCK = threading.Lock()
_LOADED: dict[tuple[str, str], TunedLens] = {}


def load(model, cache: Path | None = None,
         progress: Callable[[TunedProgress], None] | None = None) -> TunedLens:
    """The model's tuned lens: from this process if made before, else from its cache folder
    under `cache` (default: where the model's conversion is kept) when that proves whole, else
    fitted now (a minute) and kept there; `progress` is told each stage."""
    tell = progress or (lambda stage: None)
    folder = cache_folder(model, cache)
    key = (str(model.path), str(folder))
    with _LOCK:                          # one fit per process; the disk's lock between them
        if key not in _LOADED:
            _LOADED[key] = _load(model, folder, tell)
        tell(TunedProgress("done"))
        return _LOADED[key]


def kept(model, cache: Path | None = None) -> TunedLens | None:
    """The model's tuned lens when it can be had without a fit: made before in this process,
    or a whole copy in its cache folder (read and checked, ~40 MB: well under a second; then
    kept for this process, as ``load`` keeps it). None when it would have to be fitted (none
    on disk, or a damaged copy). Never waits for a fit under way in this process."""
    folder = cache_folder(model, cache)
    key = (str(model.path), str(folder))
    found = _LOADED.get(key)
    if found is not None:
        return found
    shape = (model.num_layers, model.d_model + 1, model.d_model)
    found = _open_checked(folder, model, shape)
    if not isinstance(found, TunedLens):
        return None
    return _LOADED.setdefault(key, found)


def can_keep(model, cache: Path | None = None) -> bool:
    """Whether a fit can be kept on disk: the nearest existing folder on the way to its cache
    folder is writable. When not (a read-only cache), every process fits it for itself."""
    place = cache_folder(model, cache).parent
    while not place.exists() and place != place.parent:
        place = place.parent
    return os.access(place, os.W_OK)


def cache_folder(model, cache: Path | None = None) -> Path:
    """The folder of `model`'s translators: beside its converted weights (or under `cache`),
    named after what they are fitted from (``_stamp``)."""
    from attnviz.models.decoders.gguf_llama import cache_root

    root = cache or (model.cached_in.parent if model.cached_in is not None else cache_root())
    digest = hashlib.sha256(json.dumps(_stamp(model), sort_keys=True).encode()).hexdigest()
    return Path(root) / f"tuned-lens-{digest[:12]}"


def _stamp(model) -> dict:
    """What the translators are fitted from: the model's file (its conversion's folder name,
    which changes with the file's path, size and time), the prompts, the tokens sampled, λ and
    FORMAT."""
    from attnviz.models.decoders.gguf_llama import cache_folder as model_folder

    return {"model": model_folder(Path(model.path)).name, "prompts": list(TRAINING_PROMPTS),
            "new_tokens": NEW_TOKENS, "ridge": RIDGE, "format": FORMAT}


def _load(model, folder: Path, tell) -> TunedLens:
    eps = model.config.rms_eps
    shape = (model.num_layers, model.d_model + 1, model.d_model)
    tell(TunedProgress("verifying"))
    found = _open_checked(folder, model, shape)
    if isinstance(found, TunedLens):
        disk_cache.tidy(folder)
        return found
    with disk_cache.locked(folder) as held:
        if held:
            disk_cache.remove_leftovers(folder)
            found = _open_checked(folder, model, shape)               # fitted while we waited?
            if isinstance(found, TunedLens):
                return found
        damage = found.reason if isinstance(found, disk_cache.Damage) else None
        if damage is not None:
            tell(TunedProgress("damaged", reason=damage))
        translators, tokens = _train(model, tell)
        tell(TunedProgress("writing"))

        def write_files(tmp: Path) -> None:
            np.save(tmp / FILE, translators)
            (tmp / INFO).write_text(json.dumps({"tokens": tokens}), encoding="utf-8")

        try:
            disk_cache.discard(folder)
            disk_cache.write(folder, _stamp(model), write_files)
            written = _open_checked(folder, model, shape)
        except (OSError, disk_cache.Damage):      # read-only or full: this process only
            written = None
        if not isinstance(written, TunedLens):
            return TunedLens(readonly(translators), tokens, eps, "in_memory", damage)
        return TunedLens(written.translators, tokens, eps,
                         "refitted" if damage is not None else "fitted", damage)


def _open_checked(folder: Path, model, shape) -> TunedLens | disk_cache.Damage | None:
    """The translators read from `folder` into memory if it proves whole (the manifest's
    sizes and checksums, of the bytes read; the array's shape and dtype); its Damage if not;
    None when there is none."""
    try:
        contents: dict[str, bytearray] = {}
        if not disk_cache.verify(folder, _stamp(model), {FILE, INFO}, contents):
            return None
        translators = disk_cache.npy_array(contents[FILE], FILE)
        if translators.shape != shape or translators.dtype != _DTYPE:
            raise disk_cache.Damage(Message("model_cache.shape", file=FILE,
                                            shape=f"{translators.shape} {translators.dtype}",
                                            expected=f"{shape} {np.dtype(_DTYPE)}"))
        tokens = int(json.loads(bytes(contents[INFO]).decode("utf-8"))["tokens"])
    except disk_cache.Damage as damage:
        return damage
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return disk_cache.Damage(Message("model_cache.unreadable", file=folder.name,
                                         error=f"{type(exc).__name__}: {exc}"))
    if not np.isfinite(translators).all():
        return disk_cache.Damage(Message("model_cache.checksum", file=FILE))
    return TunedLens(translators, tokens, model.config.rms_eps, "verified")
