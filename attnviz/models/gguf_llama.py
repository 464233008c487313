"""A Llama-architecture model from one GGUF file (llama.cpp's format), made ready for numpy:
its sizes, its weights dequantised to float32 in the row-vector convention (``x @ W``), and its
byte-level BPE tokenizer built with ``tokenizers`` from the vocabulary and merges inside the file.

Reading a GGUF (``gguf.GGUFReader``, ``gguf.quants.dequantize``) takes a few seconds, so the
converted arrays are kept on disk as .npy files in a cache folder (``ATTNVIZ_CACHE_DIR``, else
``$XDG_CACHE_HOME/attnviz``, else ``~/.cache/attnviz``) and read into memory (read-only arrays)
on every later load (0.66 s warm here, checks included; mapped, 0.30 s:
``benchmarks/bench_cache_copy.py``). They are read, not memory-mapped, so that a file cut or
rewritten in place under a running server can neither kill it (SIGBUS) nor change its numbers
after the check (``disk_cache``); each process holds its own copy (~520 MB).

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
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields
from pathlib import Path

import numpy as np

from attnviz.core.errors import AttnvizInputError
from attnviz.i18n import Message
from attnviz.models import disk_cache
from attnviz.models.disk_cache import Damage

FORMAT = 1                  # bump when the converted files change meaning
_DTYPE = np.float32
ARRAYS = ("embed", "qkv", "o", "gate_up", "down", "norms", "final_norm")
FILES = frozenset({f"{name}.npy" for name in ARRAYS} | {"config.json", "tokenizer.json"})


@dataclass(frozen=True)
class LlamaConfig:
    """The sizes and choices of a Llama decoder, from the GGUF's metadata."""

    num_layers: int
    num_heads: int
    num_kv_heads: int
    d_model: int
    d_ff: int                 # the SwiGLU MLP's hidden width
    vocab_size: int
    rope_base: float
    rms_eps: float
    max_positions: int        # the context length the model was trained for
    bos_id: int
    eos_id: int

    @property
    def d_k(self) -> int:
        return self.d_model // self.num_heads

    def shapes(self) -> dict[str, tuple[int, ...]]:
        """Each converted array's shape (see LlamaFile)."""
        L, d, f = self.num_layers, self.d_model, self.d_ff
        return dict(embed=(self.vocab_size, d),
                    qkv=(L, d, (self.num_heads + 2 * self.num_kv_heads) * self.d_k),
                    o=(L, self.num_heads * self.d_k, d), gate_up=(L, d, 2 * f),
                    down=(L, f, d), norms=(L, 2, d), final_norm=(d,))


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
    """

    config: LlamaConfig
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


def cache_folder(gguf_path: Path, cache: Path | None = None) -> Path:
    """The folder under `cache` (default ``cache_root()``) for a conversion of `gguf_path`:
    its name changes whenever the file (path, size, time) or FORMAT does."""
    stamp = _stamp(gguf_path)
    key = f"{stamp['path']}|{stamp['size']}|{stamp['mtime']}|{stamp['format']}"
    name = f"{gguf_path.stem.lower()}-{hashlib.sha256(key.encode()).hexdigest()[:12]}"
    return (cache or cache_root()) / name


def _stamp(gguf_path: Path) -> dict:
    """What a conversion is made from: the GGUF (path, size, time) and FORMAT. The time in
    whole seconds: an image layer (tar) keeps no more of it, so a cache converted while an
    image is built is still found in its containers."""
    stat = gguf_path.stat()
    return {"path": str(gguf_path.resolve()), "size": stat.st_size,
            "mtime": int(stat.st_mtime), "format": FORMAT}


# ---- the cache's files ------------------------------------------------------------------------

def _open_checked(folder: Path, gguf_path: Path, expected: LlamaConfig) \
        -> LlamaFile | Damage | None:
    """The converted model read from `folder` if it proves whole and agrees with the GGUF's
    metadata `expected`; its Damage if not; None when there is no folder."""
    try:
        start = time.perf_counter()
        contents: dict[str, bytearray] = {}
        if not disk_cache.verify(folder, _stamp(gguf_path), set(FILES), contents):
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
                   expected: LlamaConfig) -> LlamaFile:
    """The model from the checked bytes of `folder`'s files (``disk_cache.verify``), each
    checked against `expected`: the config equal to it, every array of its shape and dtype
    (a read-only view of its bytes), the tokenizer's vocabulary of its size. Raises Damage."""
    from tokenizers import Tokenizer

    config = _read("config.json", lambda b: LlamaConfig(**json.loads(b.decode("utf-8"))),
                   contents)
    for field in fields(LlamaConfig):
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


def _write_files(folder: Path, config: LlamaConfig, arrays: dict, tokenizer) -> None:
    for name, a in arrays.items():
        np.save(folder / f"{name}.npy", a)
    (folder / "config.json").write_text(json.dumps(asdict(config)), encoding="utf-8")
    tokenizer.save(str(folder / "tokenizer.json"))


def _frozen(a: np.ndarray) -> np.ndarray:
    a.flags.writeable = False
    return a


# ---- the GGUF's metadata ------------------------------------------------------------------------

# GGUF value types: the fixed-size ones as struct formats; 8 is a string, 9 an array
_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?",
            10: "<Q", 11: "<q", 12: "<d"}
_STRING, _ARRAY = 8, 9


def read_config(gguf_path: Path) -> LlamaConfig:
    """The model's config from the GGUF's own metadata, read directly (~15 ms; gguf's
    GGUFReader, which also maps every tensor, takes seconds)."""
    try:
        values, lengths = read_metadata(gguf_path)
    except (OSError, ValueError, KeyError, struct.error, UnicodeDecodeError) as exc:
        raise AttnvizInputError("error.gguf.unreadable", path=str(gguf_path),
                                error=f"{type(exc).__name__}: {exc}") from None
    return _config(values, lengths, gguf_path)


def read_metadata(gguf_path: Path) -> tuple[dict, dict]:
    """The GGUF's key-value metadata: (key → value for numbers, booleans and strings,
    key → length for arrays), following the format's header (magic, version 2 or 3, tensor
    count, key-value count, then each key, its type and its value). The file's first 4 MB are
    read (SmolLM2's metadata, its vocabulary and merges included, is ~2 MB), more if the
    metadata goes on: read, never mapped, so a file cut meanwhile is an error, not a SIGBUS."""
    size = 1 << 22
    with open(gguf_path, "rb") as f:
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


def _config(values: dict, lengths: dict, path: Path) -> LlamaConfig:
    def value(key: str):
        if key not in values:
            raise AttnvizInputError("error.gguf.no_key", path=str(path), key=key)
        return values[key]

    if value("general.architecture") != "llama":
        raise AttnvizInputError("error.gguf.not_llama", path=str(path),
                                architecture=repr(value("general.architecture")))
    if value("tokenizer.ggml.model") != "gpt2":
        raise AttnvizInputError("error.gguf.tokenizer", path=str(path))
    if "tokenizer.ggml.tokens" not in lengths:
        raise AttnvizInputError("error.gguf.no_key", path=str(path), key="tokenizer.ggml.tokens")
    heads, d_model = int(value("llama.attention.head_count")), int(value("llama.embedding_length"))
    config = LlamaConfig(
        num_layers=int(value("llama.block_count")), num_heads=heads,
        num_kv_heads=int(value("llama.attention.head_count_kv")), d_model=d_model,
        d_ff=int(value("llama.feed_forward_length")),
        vocab_size=int(lengths["tokenizer.ggml.tokens"]),
        rope_base=float(value("llama.rope.freq_base")),
        rms_eps=float(value("llama.attention.layer_norm_rms_epsilon")),
        max_positions=int(value("llama.context_length")),
        bos_id=int(value("tokenizer.ggml.bos_token_id")),
        eos_id=int(value("tokenizer.ggml.eos_token_id")))
    if "llama.rope.dimension_count" in values and \
            int(value("llama.rope.dimension_count")) != config.d_k:
        raise AttnvizInputError("error.gguf.partial_rope", path=str(path))
    return config


# ---- conversion -----------------------------------------------------------------------------

def convert(gguf_path: Path, on_layer: Callable[[int, int], None] | None = None) \
        -> tuple[LlamaConfig, dict, object]:
    """Read and dequantise every tensor of the GGUF at `gguf_path` into the layout of
    ``LlamaFile``, and build its tokenizer; ``on_layer(done, layers)`` after each layer."""
    try:
        from gguf import GGUFReader
    except ImportError:
        raise AttnvizInputError("error.gguf.no_package", command="pip install gguf") from None
    c = config = read_config(gguf_path)
    reader = GGUFReader(str(gguf_path))
    meta = {name: field for name, field in reader.fields.items()}
    tensors = {t.name: t for t in reader.tensors}

    def matrix(name: str) -> np.ndarray:
        """A tensor dequantised, as torch's (out, in) rows."""
        from gguf.quants import dequantize

        if name not in tensors:
            raise AttnvizInputError("error.gguf.no_tensor", path=str(gguf_path), name=name)
        t = tensors[name]
        return np.asarray(dequantize(t.data, t.tensor_type), dtype=_DTYPE)

    shapes = c.shapes()
    qkv, o, gate_up, down, norms = (np.empty(shapes[name], _DTYPE)
                                    for name in ("qkv", "o", "gate_up", "down", "norms"))
    for i in range(c.num_layers):
        p = f"blk.{i}."
        q = _unpermute(matrix(p + "attn_q.weight"), c.num_heads)           # (H d_k, d_model)
        k = _unpermute(matrix(p + "attn_k.weight"), c.num_kv_heads)        # (H_kv d_k, d_model)
        qkv[i] = np.concatenate([q, k, matrix(p + "attn_v.weight")]).T     # x @ W: (in, out)
        o[i] = matrix(p + "attn_output.weight").T
        gate_up[i] = np.concatenate([matrix(p + "ffn_gate.weight"),
                                     matrix(p + "ffn_up.weight")]).T
        down[i] = matrix(p + "ffn_down.weight").T
        norms[i] = [matrix(p + "attn_norm.weight"), matrix(p + "ffn_norm.weight")]
        if on_layer is not None:
            on_layer(i + 1, c.num_layers)
    embed = np.ascontiguousarray(matrix("token_embd.weight"))             # (vocab, d_model)
    if "output.weight" in tensors:
        raise AttnvizInputError("error.gguf.untied_output", path=str(gguf_path))
    arrays = dict(embed=embed, qkv=qkv, o=o, gate_up=gate_up, down=down, norms=norms,
                  final_norm=matrix("output_norm.weight"))
    return config, arrays, build_tokenizer(meta)


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


def build_tokenizer(meta: dict):
    """The byte-level BPE tokenizer the GGUF describes, as transformers builds it from the same
    file: the vocabulary (spelt in the byte alphabet), the merges, GPT-2's byte-level
    pre-tokenizer (its regex, no prefix space), control tokens kept whole as special tokens,
    and no BOS added."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

    tokens = list(meta["tokenizer.ggml.tokens"].contents())
    types = list(meta["tokenizer.ggml.token_type"].contents())
    merges = [tuple(m.split(" ")) for m in meta["tokenizer.ggml.merges"].contents()]
    alphabet = byte_alphabet()
    spelt = set(alphabet.values())
    vocab = {(t if set(t) <= spelt else "".join(alphabet[b] for b in t.encode("utf-8"))): i
             for i, t in enumerate(tokens)}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, fuse_unk=False, byte_fallback=False))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    control = 3                                               # llama.cpp's CONTROL token type
    tok.add_special_tokens([AddedToken(t, normalized=False, special=True)
                            for t, kind in zip(tokens, types)
                            if kind == control and set(t) <= spelt])
    return tok
