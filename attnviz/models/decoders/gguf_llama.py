"""A Llama-architecture model from one GGUF file (llama.cpp's format), made ready for numpy:
its sizes, its weights dequantised to float32 in the row-vector convention (``x @ W``), and its
byte-level BPE tokenizer built with ``tokenizers`` from the vocabulary and merges inside the file.

Reading a GGUF (``gguf.GGUFReader``, ``gguf.quants.dequantize``) takes a few seconds, so the
converted arrays are kept on disk as .npy files in a cache folder (``ATTNVIZ_CACHE_DIR``, else
``$XDG_CACHE_HOME/attnviz``, else ``~/.cache/attnviz``) and read into memory (read-only arrays)
on every later load (0.66 s warm here, checks included; mapped, 0.30 s:
``benchmarks/bench_cache_copy.py``). They are read, not memory-mapped, so that a file cut or
rewritten in place under a running server can neither kill it (SIGBUS) nor change its numbers
after the check (``disk_cache``); each process holds its own copy (~520 MB), unless
ATTNVIZ_SHARE_WEIGHTS=1: then the processes of one machine share one sealed memfd of the
checked files (``shared_weights``).

The cache proves itself (``attnviz.models.disk_cache``): it is written whole or not at all, with
a manifest of each file's size and CRC-32, and every load checks the manifest, the arrays'
shapes against config.json, and config.json against the GGUF's own metadata (read in ~15 ms by
:func:`read_config`, without gguf's reader, which takes seconds). A folder that is missing
anything, cut short, altered, unreadable or inconsistent is moved aside, deleted and made
again, once, under a lock that makes concurrent starts wait for one conversion. Where the
cache cannot be written the conversion is kept in memory instead; a cache folder that is only
readable is used as it is when it proves whole. What happened is the model's ``report``.

llama.cpp stores the rows of W_Q and W_K of each head permuted for its own rotary layout
(pairs of neighbouring features); ``_unpermute`` undoes that, giving the half-split layout of
transformers' Llama (feature i pairs with i + d_k/2), which ``attnviz.core.rotary`` uses.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields
from functools import lru_cache
from pathlib import Path

import numpy as np

from attnviz.core.errors import AttnvizInputError
from attnviz.i18n import Message
from attnviz.models import disk_cache, shared_weights
from attnviz.models.disk_cache import Damage

FORMAT = 3                  # bump when the converted files change meaning
_DTYPE = np.float32
# every converted model's arrays; a family's own (QKV_BIAS …) only where its config has them
ARRAYS = ("embed", "qkv", "o", "gate_up", "down", "norms", "final_norm")
OPTIONAL_ARRAYS = ("qkv_bias", "qk_norms", "post_norms")


@dataclass(frozen=True)
class DecoderConfig:
    """A decoder's sizes and its design's choices, from the GGUF's metadata: one spec for every
    family attnviz reads (``FAMILIES``), the variation points named as transformers' configs
    name them. The defaults are Llama's."""

    num_layers: int
    num_heads: int
    num_kv_heads: int
    d_model: int
    d_ff: int                 # the gated MLP's hidden width
    vocab_size: int
    rope_base: float          # rotary base (on every layer, or on the full-attention ones)
    rms_eps: float
    max_positions: int        # the context length the model was trained for
    bos_id: int
    eos_id: int
    head_dim: int             # d_k: d_model / heads for Llama and Qwen2, 256 for Gemma 3
    architecture: str = "llama"       # the GGUF's general.architecture
    qkv_bias: bool = False            # Q, K and V projections have biases (Qwen2)
    qk_norm: bool = False             # each head's q and k RMS-normed before RoPE (Qwen3, Gemma 3)
    post_norms: bool = False          # an RMSNorm after attention and after the MLP (Gemma 3)
    activation: str = "silu"          # the gated MLP's: "silu" or "gelu_tanh" (Gemma)
    embed_scale: float = 1.0          # the embeddings × this (Gemma: √d_model)
    attn_scale: float = 0.0           # the scores × this; 0: 1/√head_dim
    sliding_window: int | None = None  # keys a query on a sliding layer sees (itself included)
    sliding_layers: tuple = ()        # the layers with that window (Gemma 3: 5 of every 6)
    rope_local_base: float = 0.0      # the rotary base on sliding layers; 0: rope_base
    add_bos: bool = False             # a text's ids start with BOS (Gemma)
    tokenizer: str = "gpt2"           # "gpt2" (byte-level BPE) or "llama" (SentencePiece-style)
    pre_tokenizer: str = ""           # the byte-level BPE's split: tokenizer.ggml.pre

    @property
    def d_k(self) -> int:
        return self.head_dim

    @property
    def scale(self) -> float:
        """What the scores are multiplied by before the softmax."""
        return self.attn_scale or float(self.head_dim) ** -0.5

    @property
    def layer_types(self) -> tuple[str, ...]:
        """Each layer's attention: "sliding" (a window of sliding_window keys) or "full"."""
        return tuple("sliding" if i in self.sliding_layers else "full"
                     for i in range(self.num_layers))

    @property
    def rope_bases(self) -> tuple[float, ...]:
        """Each layer's rotary base."""
        return tuple(self.rope_base_of(i) for i in range(self.num_layers))

    @property
    def norms(self) -> str:
        """Where the RMSNorms are: "pre" (before attention and the MLP) or "sandwich" (before
        and after each, Gemma)."""
        return "sandwich" if self.post_norms else "pre"

    def rope_base_of(self, layer: int) -> float:
        """The rotary base of `layer`."""
        return self.rope_local_base if layer in self.sliding_layers and self.rope_local_base \
            else self.rope_base

    def window_of(self, layer: int) -> int | None:
        """How many keys back (itself included) a query of `layer` sees; None: all of them."""
        return self.sliding_window if layer in self.sliding_layers else None

    def shapes(self) -> dict[str, tuple[int, ...]]:
        """Each converted array's shape (see LlamaFile)."""
        L, d, f, k = self.num_layers, self.d_model, self.d_ff, self.head_dim
        width = (self.num_heads + 2 * self.num_kv_heads) * k
        shapes = dict(embed=(self.vocab_size, d), qkv=(L, d, width),
                      o=(L, self.num_heads * k, d), gate_up=(L, d, 2 * f),
                      down=(L, f, d), norms=(L, 2, d), final_norm=(d,))
        if self.qkv_bias:
            shapes["qkv_bias"] = (L, width)
        if self.qk_norm:
            shapes["qk_norms"] = (L, 2, k)
        if self.post_norms:
            shapes["post_norms"] = (L, 2, d)
        return shapes

    def files(self) -> frozenset[str]:
        """The cache folder's files for this model (a Gemma model's licence files too)."""
        return frozenset({f"{name}.npy" for name in self.shapes()}
                         | {"config.json", "tokenizer.json"} | set(licence_files(self)))

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> "DecoderConfig":
        raw = json.loads(text)
        raw["sliding_layers"] = tuple(raw.get("sliding_layers", ()))
        return cls(**raw)


LlamaConfig = DecoderConfig       # the name of its first family, kept for callers

LICENCES = Path(__file__).resolve().parents[1] / "catalogue" / "licences"


def licence_files(config: DecoderConfig) -> dict[str, Path]:
    """The licence files a conversion of this model carries beside its arrays: a Gemma model's
    NOTICE and the Gemma Terms of Use (its converted weights are a Model Derivative, whose
    copies must carry them); none for the others."""
    if config.architecture != "gemma3":
        return {}
    return {"NOTICE": LICENCES / "NOTICE", "GEMMA_TERMS.txt": LICENCES / "GEMMA_TERMS.txt"}


@dataclass(frozen=True)
class CacheReport:
    """What loading found in the cache. `outcome`: "verified" (a whole copy, used), "converted"
    (none yet: made now), "rebuilt" (a damaged one, `reason` says how, made again) or
    "in_memory" (it cannot be written here: the conversion stays in this process; `reason`
    when a damaged copy was found). `verify_seconds`: checking the manifest, the sizes and the
    checksums of the copy that was found whole."""

    outcome: str
    reason: Message | None = None
    verify_seconds: float = 0.0


@dataclass(frozen=True)
class LoadProgress:
    """One stage of a load, for a progress indicator: "verifying", "damaged" (`reason`),
    "reading" (the GGUF), "converting" (`layer` of `layers` done), "writing", "done"."""

    stage: str
    layer: int = 0
    layers: int = 0
    reason: Message | None = None

    @property
    def fraction(self) -> float:
        """The conversion's share done, 0 … 1."""
        return {"converting": self.layer / max(self.layers, 1), "writing": 1.0,
                "done": 1.0}.get(self.stage, 0.0)


@dataclass(frozen=True, eq=False)
class LlamaFile:
    """A converted model: config, arrays (float32, read-only, in this process's memory) and
    the tokenizer.

    embed (vocab, d_model)          token embeddings, also the tied output matrix (lm_head)
    qkv (L, d_model, (H + 2 H_kv) d_k)   W_Q | W_K | W_V side by side, heads in order
    o (L, H d_k, d_model)           W_O
    gate_up (L, d_model, 2 d_ff)    the MLP's W_gate | W_up side by side
    down (L, d_ff, d_model)         the MLP's W_down
    norms (L, 2, d_model)           RMSNorm gains before attention and before the MLP
    final_norm (d_model,)           RMSNorm gain after the last layer
    and where the config has them:
    qkv_bias (L, (H + 2 H_kv) d_k)  the biases of W_Q | W_K | W_V (qkv_bias)
    qk_norms (L, 2, d_k)            RMSNorm gains of each head's q and of its k (qk_norm)
    post_norms (L, 2, d_model)      RMSNorm gains after attention and after the MLP (post_norms)
    A Gemma gain is stored as the model computes it: 1 + the checkpoint's weight, as the GGUF
    holds it.
    """

    config: DecoderConfig
    arrays: dict
    tokenizer: object          # tokenizers.Tokenizer
    source: Path
    cached_in: Path | None     # the folder the arrays were read from; None = converted here
    report: CacheReport = CacheReport("converted")


def cache_root() -> Path:
    """Where converted models are kept: ATTNVIZ_CACHE_DIR, else XDG_CACHE_HOME/attnviz, else
    ~/.cache/attnviz."""
    if os.environ.get("ATTNVIZ_CACHE_DIR"):
        return Path(os.environ["ATTNVIZ_CACHE_DIR"])
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "attnviz"


def load(gguf_path: Path, cache: Path | None = None,
         progress: Callable[[LoadProgress], None] | None = None) -> LlamaFile:
    """The model in `gguf_path`, from its cache folder under `cache` (default ``cache_root()``)
    when that proves whole, else converted now and cached (a damaged folder replaced), or kept
    in memory where nothing can be written. `progress` is told each stage."""
    tell = progress or (lambda stage: None)
    gguf_path = Path(gguf_path)
    if not gguf_path.is_file():
        raise AttnvizInputError("error.gguf.missing", path=str(gguf_path))
    expected = read_config(gguf_path)
    check_memory(expected, gguf_path, converting=False)
    folder = cache_folder(gguf_path, cache)
    tell(LoadProgress("verifying"))
    found = _open_checked(folder, gguf_path, expected)
    if isinstance(found, LlamaFile):
        disk_cache.tidy(folder)              # a killed conversion's leftovers, if any
        return _done(found, tell)
    with disk_cache.locked(folder) as held:
        if held:                             # no conversion runs: leftovers are leftovers
            disk_cache.remove_leftovers(folder)
            found = _open_checked(folder, gguf_path, expected)   # made while we waited?
            if isinstance(found, LlamaFile):
                return _done(found, tell)
        damage = found.reason if isinstance(found, Damage) else None
        if damage is not None:
            tell(LoadProgress("damaged", reason=damage))
        check_memory(expected, gguf_path, converting=True)
        tell(LoadProgress("reading"))
        made = convert(gguf_path, on_layer=lambda done, layers: tell(
            LoadProgress("converting", layer=done, layers=layers)))
        tell(LoadProgress("writing"))
        try:
            disk_cache.discard(folder)
            disk_cache.write(folder, _stamp(gguf_path), lambda tmp: _write_files(tmp, *made))
            written = _open_checked(folder, gguf_path, expected)
        except (OSError, Damage):            # read-only or full: run from memory this time
            written = None
        if not isinstance(written, LlamaFile):
            config, arrays, tokenizer = made
            return _done(LlamaFile(config, {k: _frozen(a) for k, a in arrays.items()},
                                   tokenizer, gguf_path, None, CacheReport("in_memory", damage)),
                         tell)
        outcome = "rebuilt" if damage is not None else "converted"
        return _done(LlamaFile(written.config, written.arrays, written.tokenizer, gguf_path,
                               folder, CacheReport(outcome, damage)), tell)


def _done(f: LlamaFile, tell) -> LlamaFile:
    tell(LoadProgress("done"))
    return f


def float32_bytes(config: DecoderConfig) -> int:
    """What the model's arrays take in float32, the form attnviz computes in."""
    return 4 * sum(int(np.prod(shape)) for shape in config.shapes().values())


def available_memory() -> int | None:
    """The memory this machine can still give without swapping (Linux's MemAvailable, and a
    cgroup's limit where one is set below it); None where neither can be read."""
    found = []
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    found.append(int(line.split()[1]) * 1024)
    except OSError:
        pass
    for limit, used in (("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),):
        try:
            cap = Path(limit).read_text().strip()
            if cap != "max":
                found.append(int(cap) - int(Path(used).read_text().strip()))
        except (OSError, ValueError):
            pass
    return min(found) if found else None


def check_memory(config: DecoderConfig, gguf_path: Path, *, converting: bool) -> None:
    """error.gguf.too_large, saying both numbers, when the model's float32 arrays (and, while
    `converting`, as much again) would not fit in the memory available."""
    arrays, free = float32_bytes(config), available_memory()
    if free is not None and (2 if converting else 1) * arrays > free:
        raise AttnvizInputError("error.gguf.too_large", path=str(gguf_path),
                                need=f"{arrays / 1e9:.1f}", available=f"{free / 1e9:.1f}")


def cache_folder(gguf_path: Path, cache: Path | None = None) -> Path:
    """The folder under `cache` (default ``cache_root()``) for a conversion of `gguf_path`:
    keyed by the file's content (its SHA-256) and FORMAT, so a copy of the file elsewhere
    finds the same conversion and a file changed in any byte never does."""
    return (cache or cache_root()) / \
        f"{gguf_path.stem.lower()}-{content_hash(gguf_path)[:16]}-f{FORMAT}"


def _stamp(gguf_path: Path) -> dict:
    """What a conversion is made from: the GGUF's content (SHA-256) and FORMAT."""
    return {"sha256": content_hash(gguf_path), "format": FORMAT}


_HASHES: dict[tuple, str] = {}
_HASHES_LOCK = threading.Lock()
INDEX = "gguf-hashes.json"


def content_hash(gguf_path: Path) -> str:
    """The SHA-256 of the file at `gguf_path`, computed once per file version: remembered for
    this process and, across processes, in an index beside the caches (``INDEX`` in
    ``cache_root()``: path, size, time to the nanosecond, inode → hash), so a load reads the
    whole file (~0.3 s for 250 MB here) only when the file is new or changed."""
    stat = Path(gguf_path).stat()
    path = str(Path(gguf_path).resolve())
    version = (path, stat.st_size, stat.st_mtime_ns, stat.st_ino)
    with _HASHES_LOCK:
        if version in _HASHES:
            return _HASHES[version]
        index_file = cache_root() / INDEX
        try:
            index = json.loads(index_file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            index = {}
        known = index.get(path) if isinstance(index, dict) else None
        if isinstance(known, dict) and [known.get(k) for k in ("size", "mtime_ns", "ino")] == \
                list(version[1:]) and isinstance(known.get("sha256"), str):
            digest = known["sha256"]
        else:
            h = hashlib.sha256()
            with open(gguf_path, "rb") as f:
                for block in iter(lambda: f.read(1 << 22), b""):
                    h.update(block)
            digest = h.hexdigest()
            index = index if isinstance(index, dict) else {}
            index[path] = {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns,
                           "ino": stat.st_ino, "sha256": digest}
            try:                                  # written whole, or not at all
                index_file.parent.mkdir(parents=True, exist_ok=True)
                partial = index_file.with_name(f".{INDEX}.{os.getpid()}.{threading.get_ident()}")
                partial.write_text(json.dumps(index), encoding="utf-8")
                os.replace(partial, index_file)
            except OSError:                       # a read-only cache: this process remembers
                pass
        _HASHES[version] = digest
        return digest


# ---- the cache's files ------------------------------------------------------------------------

def _open_checked(folder: Path, gguf_path: Path, expected: DecoderConfig) \
        -> LlamaFile | Damage | None:
    """The converted model read from `folder` if it proves whole and agrees with the GGUF's
    metadata `expected`; its Damage if not; None when there is no folder."""
    try:
        start = time.perf_counter()
        contents: dict[str, bytearray] = {}
        check = shared_weights.verify if shared_weights.enabled() else disk_cache.verify
        if not check(folder, _stamp(gguf_path), set(expected.files()), contents):
            return None
        seconds = time.perf_counter() - start
        f = _from_contents(contents, folder, gguf_path, expected)
    except Damage as damage:
        return damage
    except OSError as exc:                   # vanished or unreadable while being checked
        return Damage(Message("model_cache.unreadable", file=folder.name,
                              error=f"{type(exc).__name__}: {exc}"))
    return LlamaFile(f.config, f.arrays, f.tokenizer, gguf_path, folder,
                     CacheReport("verified", None, seconds))


def _from_contents(contents: dict[str, bytearray], folder: Path, gguf_path: Path,
                   expected: DecoderConfig) -> LlamaFile:
    """The model from the checked bytes of `folder`'s files (``disk_cache.verify``), each
    checked against `expected`: the config equal to it, every array of its shape and dtype
    (a read-only view of its bytes), the tokenizer's vocabulary of its size. Raises Damage."""
    from tokenizers import Tokenizer

    config = _read("config.json", lambda b: DecoderConfig.from_json(b.decode("utf-8")),
                   contents)
    for field in fields(DecoderConfig):
        if getattr(config, field.name) != getattr(expected, field.name):
            raise Damage(Message("model_cache.config", field=field.name,
                                 value=getattr(config, field.name),
                                 expected=getattr(expected, field.name)))
    arrays = {}
    for name, shape in expected.shapes().items():
        a = disk_cache.npy_array(contents.pop(f"{name}.npy"), f"{name}.npy")
        if a.shape != shape or a.dtype != _DTYPE:
            raise Damage(Message("model_cache.shape", file=f"{name}.npy",
                                 shape=f"{a.shape} {a.dtype}", expected=f"{shape} {_DTYPE}"))
        arrays[name] = a
    tokenizer = _read("tokenizer.json", lambda b: Tokenizer.from_str(b.decode("utf-8")),
                      contents)
    if tokenizer.get_vocab_size() != expected.vocab_size:
        raise Damage(Message("model_cache.config", field="vocab_size",
                             value=tokenizer.get_vocab_size(), expected=expected.vocab_size))
    return LlamaFile(config, arrays, tokenizer, gguf_path, folder)


def _read(name: str, read, contents: dict[str, bytearray]):
    """read(the checked bytes of file `name`), any failure a Damage naming the file."""
    try:
        return read(bytes(contents[name]))
    except Exception as exc:                 # json, tokenizers: each its own errors
        raise Damage(Message("model_cache.unreadable", file=name,
                             error=f"{type(exc).__name__}: {exc}"[:200])) from exc


def _write_files(folder: Path, config: DecoderConfig, arrays: dict, tokenizer) -> None:
    for name, a in arrays.items():
        np.save(folder / f"{name}.npy", a)
    (folder / "config.json").write_text(config.to_json(), encoding="utf-8")
    tokenizer.save(str(folder / "tokenizer.json"))
    for name, source in licence_files(config).items():
        (folder / name).write_bytes(source.read_bytes())


def _frozen(a: np.ndarray) -> np.ndarray:
    a.flags.writeable = False
    return a


# ---- the GGUF's metadata ------------------------------------------------------------------------

# GGUF value types: the fixed-size ones as struct formats; 8 is a string, 9 an array
_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?",
            10: "<Q", 11: "<q", 12: "<d"}
_STRING, _ARRAY = 8, 9


def read_config(gguf_path: Path) -> DecoderConfig:
    """The model's config from the GGUF's own metadata, read directly (~15 ms; gguf's
    GGUFReader, which also maps every tensor, takes seconds)."""
    return _config(*_checked_metadata(gguf_path), gguf_path)


def model_name(gguf_path: Path) -> str:
    """The model's own name from its GGUF's metadata (general.name, else the file's name)."""
    values, _ = _checked_metadata(gguf_path)
    return str(values.get("general.name") or Path(gguf_path).stem)


def _checked_metadata(gguf_path: Path) -> tuple[dict, dict]:
    """``read_metadata``, a file it cannot read being error.gguf.unreadable."""
    try:
        return read_metadata(gguf_path)
    except (OSError, ValueError, KeyError, struct.error, UnicodeDecodeError) as exc:
        raise AttnvizInputError("error.gguf.unreadable", path=str(gguf_path),
                                error=f"{type(exc).__name__}: {exc}") from None


def read_metadata(gguf_path: Path) -> tuple[dict, dict]:
    """The GGUF's key-value metadata: (key → value for numbers, booleans and strings,
    key → length for arrays), following the format's header (magic, version 2 or 3, tensor
    count, key-value count, then each key, its type and its value). The file's first 4 MB are
    read (SmolLM2's metadata, its vocabulary and merges included, is ~2 MB), more if the
    metadata goes on: read, never mapped, so a file cut meanwhile is an error, not a SIGBUS.
    Kept for the process while the file's size and modification time stay the same: every
    page's run asks its model's sizes, and walking Gemma 3's 262,144 vocabulary strings takes
    ~0.1 s each time."""
    status = os.stat(gguf_path)
    values, lengths = _read_metadata(str(Path(gguf_path).resolve()), status.st_size,
                                     status.st_mtime_ns)
    return dict(values), dict(lengths)


@lru_cache(maxsize=32)
def _read_metadata(path: str, size: int, mtime_ns: int) -> tuple[dict, dict]:
    """read_metadata of the file `path` as it is at that size and time (the cache's key)."""
    size = 1 << 22
    with open(path, "rb") as f:
        while True:
            f.seek(0)
            m = f.read(size)
            try:
                return _metadata(m)
            except struct.error:                 # the metadata goes on past what was read
                if len(m) < size:
                    raise ValueError("the file ends inside its metadata") from None
                size *= 4


def _metadata(m: bytes) -> tuple[dict, dict]:
    """read_metadata on the file's first bytes `m`; struct.error when they end too soon."""
    if m[:4] != b"GGUF" or struct.unpack_from("<I", m, 4)[0] not in (2, 3):
        raise ValueError("not a GGUF file of version 2 or 3")
    count = struct.unpack_from("<Q", m, 16)[0]
    pos, values, lengths = 24, {}, {}

    def string(pos: int) -> tuple[str, int]:
        n = struct.unpack_from("<Q", m, pos)[0]
        if pos + 8 + n > len(m):
            raise struct.error("a string past the bytes read")
        return m[pos + 8:pos + 8 + n].decode("utf-8"), pos + 8 + n

    def skip(kind: int, n: int, pos: int) -> int:
        if kind in _SCALARS:
            pos += struct.calcsize(_SCALARS[kind]) * n
            if pos > len(m):
                raise struct.error("an array past the bytes read")
            return pos
        if kind != _STRING:
            raise ValueError(f"array of type {kind}")
        length = struct.Struct("<Q").unpack_from
        for _ in range(n):
            pos += 8 + length(m, pos)[0]
        if pos > len(m):
            raise struct.error("an array past the bytes read")
        return pos

    for _ in range(count):
        key, pos = string(pos)
        kind = struct.unpack_from("<I", m, pos)[0]
        pos += 4
        if kind == _ARRAY:
            inner, lengths[key] = struct.unpack_from("<IQ", m, pos)
            pos = skip(inner, lengths[key], pos + 12)
        elif kind == _STRING:
            values[key], pos = string(pos)
        else:
            values[key] = struct.unpack_from(_SCALARS[kind], m, pos)[0]
            pos += struct.calcsize(_SCALARS[kind])
    return values, lengths


@dataclass(frozen=True)
class Family:
    """What one GGUF ``general.architecture`` adds to Llama's layer, as llama.cpp writes it."""

    permuted_qk: bool = False    # W_Q/W_K rows permuted for llama.cpp's rotary layout (Llama only)
    qkv_bias: bool = False
    qk_norm: bool = False
    post_norms: bool = False
    gemma: bool = False          # GELU-tanh, embeddings × √d_model, sliding layers, BOS


# One entry per architecture read: a fifth is one line here, its config fields and its fixture
# (tests/tiny_decoders.py); docs/architecture.md says how.
FAMILIES = {
    "llama": Family(permuted_qk=True),
    "qwen2": Family(qkv_bias=True),
    "qwen3": Family(qk_norm=True),
    "gemma3": Family(qk_norm=True, post_norms=True, gemma=True),
}
# Gemma 3's choices that its GGUF does not state, as llama.cpp and transformers assume them:
# every 6th layer global (the others slide), the sliding layers' rotary base, and the scores'
# scale 1/√query_pre_attn_scalar = 1/√256 (Gemma 3's head size, but for 27B's)
GEMMA3_GLOBAL_EVERY, GEMMA3_LOCAL_BASE, GEMMA3_QUERY_SCALAR = 6, 10_000.0, 256


def _config(values: dict, lengths: dict, path: Path) -> DecoderConfig:
    def value(key: str):
        if key not in values:
            raise AttnvizInputError("error.gguf.no_key", path=str(path), key=key)
        return values[key]

    arch = value("general.architecture")
    if arch not in FAMILIES:
        raise AttnvizInputError("error.gguf.architecture", path=str(path), architecture=repr(arch),
                                supported=", ".join(FAMILIES))
    family = FAMILIES[arch]
    tokenizer = value("tokenizer.ggml.model")
    if tokenizer not in ("gpt2", "llama"):
        raise AttnvizInputError("error.gguf.tokenizer", path=str(path), tokenizer=repr(tokenizer))
    if "tokenizer.ggml.tokens" not in lengths:
        raise AttnvizInputError("error.gguf.no_key", path=str(path), key="tokenizer.ggml.tokens")
    for key in (f"{arch}.rope.scaling.type", f"{arch}.attn_logit_softcapping",
                f"{arch}.final_logit_softcapping"):
        if values.get(key) not in (None, "none"):
            raise AttnvizInputError("error.gguf.unsupported", path=str(path), key=key,
                                    value=repr(values[key]))
    heads, d_model = int(value(f"{arch}.attention.head_count")), \
        int(value(f"{arch}.embedding_length"))
    head_dim = int(values.get(f"{arch}.attention.key_length", d_model // heads))
    layers = int(value(f"{arch}.block_count"))
    gemma = {}
    if family.gemma:
        gemma = dict(activation="gelu_tanh", embed_scale=float(np.float32(d_model ** 0.5)),
                     attn_scale=GEMMA3_QUERY_SCALAR ** -0.5,
                     sliding_window=int(value(f"{arch}.attention.sliding_window")),
                     sliding_layers=tuple(i for i in range(layers)
                                          if (i + 1) % GEMMA3_GLOBAL_EVERY),
                     rope_local_base=GEMMA3_LOCAL_BASE)
    config = DecoderConfig(
        num_layers=layers, num_heads=heads,
        num_kv_heads=int(value(f"{arch}.attention.head_count_kv")), d_model=d_model,
        d_ff=int(value(f"{arch}.feed_forward_length")),
        vocab_size=int(lengths["tokenizer.ggml.tokens"]),
        rope_base=float(value(f"{arch}.rope.freq_base")),
        rms_eps=float(value(f"{arch}.attention.layer_norm_rms_epsilon")),
        max_positions=int(value(f"{arch}.context_length")),
        bos_id=int(value("tokenizer.ggml.bos_token_id")),
        eos_id=int(value("tokenizer.ggml.eos_token_id")),
        head_dim=head_dim, architecture=arch, qkv_bias=family.qkv_bias,
        qk_norm=family.qk_norm, post_norms=family.post_norms,
        add_bos=bool(values.get("tokenizer.ggml.add_bos_token", tokenizer == "llama")),
        tokenizer=tokenizer, pre_tokenizer=str(values.get("tokenizer.ggml.pre", "")), **gemma)
    if int(values.get(f"{arch}.attention.value_length", head_dim)) != head_dim:
        raise AttnvizInputError("error.gguf.unsupported", path=str(path),
                                key=f"{arch}.attention.value_length",
                                value=values[f"{arch}.attention.value_length"])
    if f"{arch}.rope.dimension_count" in values and \
            int(value(f"{arch}.rope.dimension_count")) != head_dim:
        raise AttnvizInputError("error.gguf.partial_rope", path=str(path))
    return config


# ---- conversion -----------------------------------------------------------------------------

def convert(gguf_path: Path, on_layer: Callable[[int, int], None] | None = None) \
        -> tuple[DecoderConfig, dict, object]:
    """Read and dequantise every tensor of the GGUF at `gguf_path` into the layout of
    ``LlamaFile``, and build its tokenizer; ``on_layer(done, layers)`` after each layer."""
    try:
        from gguf import GGUFReader
    except ImportError:
        raise AttnvizInputError("error.gguf.no_package", command="pip install gguf") from None
    c = config = read_config(gguf_path)
    family = FAMILIES[c.architecture]
    try:
        reader = GGUFReader(str(gguf_path))
        size = gguf_path.stat().st_size
        end = max((t.data_offset + t.n_bytes for t in reader.tensors), default=0)
    except (ValueError, IndexError, KeyError, OSError, struct.error) as exc:   # cut, damaged
        raise AttnvizInputError("error.gguf.unreadable", path=str(gguf_path),
                                error=f"{type(exc).__name__}: {exc}"[:300]) from None
    if end > size:
        raise AttnvizInputError("error.gguf.unreadable", path=str(gguf_path),
                                error=f"the file ends at byte {size}, its tensors at {end}")
    meta = {name: field for name, field in reader.fields.items()}
    tensors = {t.name: t for t in reader.tensors}

    def matrix(name: str) -> np.ndarray:
        """A tensor dequantised, as torch's (out, in) rows (a vector as it is)."""
        from gguf.quants import dequantize

        if name not in tensors:
            raise AttnvizInputError("error.gguf.no_tensor", path=str(gguf_path), name=name)
        t = tensors[name]
        try:
            return np.asarray(dequantize(t.data, t.tensor_type), dtype=_DTYPE)
        except (NotImplementedError, KeyError, ValueError) as exc:   # a type gguf cannot read
            raise AttnvizInputError("error.gguf.quant_type", path=str(gguf_path), name=name,
                                    type=getattr(t.tensor_type, "name", str(t.tensor_type)),
                                    error=f"{type(exc).__name__}: {exc}"[:200]) from None

    def qk(name: str, heads: int) -> np.ndarray:
        w = matrix(name)
        return _unpermute(w, heads) if family.permuted_qk else w

    shapes = c.shapes()
    arrays = {name: np.empty(shape, _DTYPE) for name, shape in shapes.items()
              if name not in ("embed", "final_norm")}
    for i in range(c.num_layers):
        p = f"blk.{i}."
        q = qk(p + "attn_q.weight", c.num_heads)                           # (H d_k, d_model)
        k = qk(p + "attn_k.weight", c.num_kv_heads)                        # (H_kv d_k, d_model)
        arrays["qkv"][i] = np.concatenate([q, k, matrix(p + "attn_v.weight")]).T   # (in, out)
        arrays["o"][i] = matrix(p + "attn_output.weight").T
        arrays["gate_up"][i] = np.concatenate([matrix(p + "ffn_gate.weight"),
                                               matrix(p + "ffn_up.weight")]).T
        arrays["down"][i] = matrix(p + "ffn_down.weight").T
        arrays["norms"][i] = [matrix(p + "attn_norm.weight"), matrix(p + "ffn_norm.weight")]
        if c.qkv_bias:
            arrays["qkv_bias"][i] = np.concatenate(
                [qk(p + "attn_q.bias", c.num_heads), qk(p + "attn_k.bias", c.num_kv_heads),
                 matrix(p + "attn_v.bias")])
        if c.qk_norm:
            arrays["qk_norms"][i] = [matrix(p + "attn_q_norm.weight"),
                                     matrix(p + "attn_k_norm.weight")]
        if c.post_norms:
            arrays["post_norms"][i] = [matrix(p + "post_attention_norm.weight"),
                                       matrix(p + "post_ffw_norm.weight")]
        if on_layer is not None:
            on_layer(i + 1, c.num_layers)
    arrays["embed"] = np.ascontiguousarray(matrix("token_embd.weight"))   # (vocab, d_model)
    if "output.weight" in tensors:
        raise AttnvizInputError("error.gguf.untied_output", path=str(gguf_path))
    arrays["final_norm"] = matrix("output_norm.weight")
    for name, shape in shapes.items():
        if arrays[name].shape != shape:
            raise AttnvizInputError("error.gguf.no_tensor", path=str(gguf_path),
                                    name=f"{name} {shape}")
    return config, arrays, build_tokenizer(meta, c)


def _unpermute(w: np.ndarray, heads: int) -> np.ndarray:
    """Undo llama.cpp's permutation of W_Q or W_K rows (H·d_k, d_in). Its converter wrote each
    head's rows (2, d_k/2) — the two halves of transformers' layout — as (d_k/2, 2), so that
    rotary pairs are neighbours; this reads them back as halves."""
    rows, d_in = w.shape
    return w.reshape(heads, rows // heads // 2, 2, d_in).swapaxes(1, 2).reshape(rows, d_in)


# ---- the tokenizer --------------------------------------------------------------------------

def byte_alphabet() -> dict[int, str]:
    """GPT-2's byte → printable character table (bytes_to_unicode): printable Latin-1 bytes
    stand for themselves, the others (space, control bytes…) for characters from U+0100 on,
    so a space is 'Ġ' and a newline 'Ċ'."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) \
        + list(range(ord("®"), ord("ÿ") + 1))
    table, extra = {}, 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return table


# the byte-level BPE's splits, by the GGUF's tokenizer.ggml.pre (transformers' and llama.cpp's
# regexes); any other name: GPT-2's own (SmolLM2's "smollm")
_QWEN2_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
                r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
_LLAMA3_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
                 r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
SPLITS = {"qwen2": _QWEN2_SPLIT, "deepseek-r1-qwen": _QWEN2_SPLIT, "llama-bpe": _LLAMA3_SPLIT,
          "llama3": _LLAMA3_SPLIT, "llama-v3": _LLAMA3_SPLIT, "smaug-bpe": _LLAMA3_SPLIT}
CONTROL, USER_DEFINED = 3, 4          # llama.cpp's token types


def build_tokenizer(meta: dict, config: DecoderConfig):
    """The tokenizer the GGUF describes, as transformers builds it from the same file: byte-level
    BPE (``tokenizer.ggml.model`` gpt2) or SentencePiece-style BPE with byte fallback (llama,
    Gemma's); control tokens kept whole as special tokens, user-defined ones as added tokens.
    No BOS is added here (``DecoderModel.encode`` adds it where the config says so)."""
    tokens = list(meta["tokenizer.ggml.tokens"].contents())
    types = list(meta["tokenizer.ggml.token_type"].contents())
    merges = [tuple(m.split(" ")) for m in meta["tokenizer.ggml.merges"].contents()] \
        if "tokenizer.ggml.merges" in meta else None
    if config.tokenizer == "gpt2":
        return _byte_level(tokens, types, merges, config.pre_tokenizer)
    return _sentencepiece(tokens, types, merges, meta)


def _byte_level(tokens: list[str], types: list[int], merges, pre: str):
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers

    alphabet = byte_alphabet()
    spelt = set(alphabet.values())
    vocab = {(t if set(t) <= spelt else "".join(alphabet[b] for b in t.encode("utf-8"))): i
             for i, t in enumerate(tokens)}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges or [], fuse_unk=False,
                               byte_fallback=False))
    if pre in SPLITS:
        tok.pre_tokenizer = pre_tokenizers.Sequence(
            [pre_tokenizers.Split(Regex(SPLITS[pre]), behavior="isolated"),
             pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    else:
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken(t, normalized=False, special=True)
                            for t, kind in zip(tokens, types)
                            if kind == CONTROL and set(t) <= spelt])
    tok.add_tokens([AddedToken(t, normalized=False, special=False)
                    for t, kind in zip(tokens, types) if kind == USER_DEFINED and t in vocab])
    return tok


def _sentencepiece(tokens: list[str], types: list[int], merges, meta: dict):
    """Gemma's tokenizer from its GGUF, as transformers' ``gemma_tokenizer`` builds it: a token
    of two or more spaces is spelt with ▁ as the vocabulary's other tokens are; the file has no
    merges, so they are made from the vocabulary, ranked by the tokens' order in the file."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers, pre_tokenizers

    spelt = ["\u2581" * len(t) if " " in t and not t.strip() else t for t in tokens]
    vocab = {t: i for i, t in enumerate(spelt)}
    if merges is None:
        merges = _merges_by_order(vocab)
    unknown = int(meta["tokenizer.ggml.unknown_token_id"].contents()) \
        if "tokenizer.ggml.unknown_token_id" in meta else None
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, fuse_unk=True, byte_fallback=True,
                               unk_token=None if unknown is None else spelt[unknown]))
    tok.normalizer = normalizers.Replace(" ", "\u2581")
    tok.pre_tokenizer = pre_tokenizers.Split(" ", behavior="merged_with_previous")
    tok.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(),
                                     decoders.Fuse()])
    tok.add_special_tokens([AddedToken(t, normalized=False, special=True)
                            for t, kind in zip(spelt, types) if kind == CONTROL])
    tok.add_tokens([AddedToken(t, normalized=False, special=False)
                    for t, kind in zip(spelt, types) if kind == USER_DEFINED])
    return tok


def _merges_by_order(vocab: dict[str, int]) -> list[tuple[str, str]]:
    """Every split of a token into two tokens of the vocabulary, ranked by the token's place in
    the file (earlier first), then the longer left piece, then the longer right one: what
    transformers' ``generate_merges`` gives with the negated places as scores."""
    ranked = []
    for token, place in vocab.items():
        local = [(token[:i], token[i:]) for i in range(1, len(token))
                 if token[:i] in vocab and token[i:] in vocab]
        local.sort(key=lambda m: (vocab[m[0]], vocab[m[1]]))
        ranked += [(-place, len(l), len(r), l, r) for l, r in local]
    order = sorted(range(len(ranked)), key=lambda i: ranked[i][:3], reverse=True)
    return [(ranked[i][3], ranked[i][4]) for i in order]


def file_type(path: str | Path) -> str:
    """How a GGUF file stores its weights, as its header says (general.file_type: "Q4_1",
    "Q4_K_M", "F32" …; "GGUF" when it does not say or cannot be read). Read with the rest of
    the metadata (read_metadata, kept per file): gguf's GGUFReader makes an object of every
    one of the header's fields, ~15 s for Gemma 3's vocabulary."""
    import gguf

    try:
        value = int(read_metadata(Path(path))[0]["general.file_type"])
        return gguf.LlamaFileType(value).name.removeprefix("MOSTLY_").removeprefix("ALL_")
    except (KeyError, ValueError, TypeError, OSError, struct.error, UnicodeDecodeError):
        return "GGUF"
