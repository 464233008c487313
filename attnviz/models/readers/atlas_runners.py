"""Where the head atlas's reduce runs: a pool of processes on this machine (the default), or a
Ray cluster (``attnviz[cluster]``). Both cut the corpus into shards of consecutive texts, run
``atlas.reduce`` on each where a model is loaded once per worker, and merge the partials in
shard order; since merge is associative and every text is read alone, both give the atlas one
process would (counts, examples and samples exactly; sums to rounding).

A model is named by ``model_ref``: a built-in decoder's name (``smollm2``, ``gemma3-270m``) or
the path of a GGUF file, loaded by ``DecoderModel.load`` in each worker.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
from contextlib import contextmanager
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from attnviz.models.readers import atlas
from attnviz.models.readers.atlas import Partial, Settings

__all__ = ["ONE_THREAD", "load_model", "run_local", "run_pool", "run_ray", "shards"]

# each worker's BLAS and OpenMP threads: one, so W workers use W cores
ONE_THREAD = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
_WORKER_MODEL = None                      # the model a pool worker loaded (its initializer)


def load_model(model_ref: str):
    """The ``DecoderModel`` `model_ref` names (a built-in name or a GGUF path)."""
    from attnviz.models.catalogue.builtin import BUILT_IN
    from attnviz.models.decoders.decoder import DecoderModel

    if model_ref in BUILT_IN:
        return DecoderModel.load(name=model_ref)
    return DecoderModel.load(Path(model_ref))


def shards(texts: Sequence[str], count: int) -> list[list[str]]:
    """`texts` cut into `count` runs of consecutive texts of near-equal size in UTF-8 bytes
    (a byte-level tokenizer's tokens follow bytes more closely than characters: a Chinese
    character is 3 bytes and 1–2 tokens); none empty unless there are fewer texts."""
    texts = list(texts)
    count = max(1, min(count, len(texts)))
    sizes = [len(t.encode("utf-8")) for t in texts]
    total = sum(sizes) or 1
    out, seen = [[] for _ in range(count)], 0
    for text, size in zip(texts, sizes):
        out[min(count - 1, int((seen + size / 2) * count / total))].append(text)
        seen += size
    return [s for s in out if s] or [[]]


def run_local(model_ref: str, texts: Sequence[str], settings: Settings = Settings()) -> Partial:
    """The atlas in this process: one reduce over every text."""
    return atlas.reduce(load_model(model_ref), texts, settings)


def _start_worker(model_ref: str) -> None:
    global _WORKER_MODEL
    _WORKER_MODEL = load_model(model_ref)


def _reduce_shard(texts: list[str], settings: Settings) -> Partial:
    return atlas.reduce(_WORKER_MODEL, texts, settings)


def run_pool(model_ref: str, texts: Sequence[str], workers: int = 2,
             settings: Settings = Settings(), per_worker: int = 4) -> Partial:
    """The atlas by `workers` processes (spawned, one BLAS thread each, the model loaded once
    in each), the corpus in per_worker × workers shards."""
    saved = {k: os.environ.get(k) for k in ONE_THREAD}
    os.environ.update(ONE_THREAD)                     # the spawned workers inherit it
    try:
        with _main_path_hidden(), ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"),
                                 initializer=_start_worker, initargs=(model_ref,)) as pool:
            parts = list(pool.map(_reduce_shard, shards(texts, workers * per_worker),
                                  [settings] * (workers * per_worker)))
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return atlas.merge_all(parts)


@contextmanager
def _main_path_hidden():
    """While the pool starts its workers: spawn runs the parent's ``__main__`` file again in
    each worker (multiprocessing's ``_fixup_main_from_path``), which a worker never needs and
    which may not run alone — Streamlit's AppTest leaves a temporary script there that calls
    names it was given (the suite saw NameError: __args) — so its path is hidden meanwhile."""
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    if path is not None:
        del main.__file__
    try:
        yield
    finally:
        if path is not None:
            main.__file__ = path


class _RayWorker:
    """A Ray actor holding one model (loaded once), reducing the shards it is given."""

    def __init__(self, model_ref: str):
        self.model = load_model(model_ref)

    def reduce(self, texts: list[str], settings: Settings) -> Partial:
        return atlas.reduce(self.model, texts, settings)


def run_ray(model_ref: str, texts: Sequence[str], address: str | None = None,
            workers: int | None = None, settings: Settings = Settings(),
            per_worker: int = 4) -> Partial:
    """The atlas by Ray actors, one CPU and one BLAS thread each, on the cluster at `address`
    (``ray://host:10001``, ``auto``: every node has attnviz[cluster] and the model installed)
    or, with None or "local", a Ray started on this machine (and stopped after). workers: the
    actors (default: the cluster's CPUs)."""
    import ray

    local = address in (None, "local")
    env = {"env_vars": dict(ONE_THREAD)}
    if local:        # this machine's workers import attnviz from where this process does
        env["env_vars"]["PYTHONPATH"] = str(Path(atlas.__file__).resolve().parents[3])
    started = not ray.is_initialized()
    if started:
        ray.init(address=None if local else address, runtime_env=env,
                 num_cpus=workers if local else None, include_dashboard=False,
                 log_to_driver=False)
    try:
        workers = workers or max(1, int(ray.cluster_resources().get("CPU", 1)))
        actor = ray.remote(num_cpus=1)(_RayWorker)
        actors = [actor.remote(model_ref) for _ in range(workers)]
        pool = ray.util.ActorPool(actors)
        parts = list(pool.map(lambda a, shard: a.reduce.remote(shard, settings),
                              shards(texts, workers * per_worker)))
        for a in actors:
            ray.kill(a)
    finally:
        if started:
            ray.shutdown()
    return atlas.merge_all(parts)
