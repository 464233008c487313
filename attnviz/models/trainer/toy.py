"""Train attention yourself: a tiny transformer learns a toy task in seconds, on the CPU.

    import attnviz.models.trainer.toy
    run = attnviz.models.trainer.toy.train("reverse")  # length 8, vocab 10, 1 layer, 2 heads
    run.accuracy                                # (8,) held-out accuracy per position
    run.trace([3, 1, 4, 1, 5, 9, 2, 6])         # layer 0's AttentionTrace: every head, every step
    run.trace(seq, step=run.checkpoints[3].step)   # the same layer earlier in training

The model (torch inside, numpy out; no LayerNorm inside the stack, so the input of each layer's
attention *is* the residual stream):

    h_0     = E_token[x] + P                   P learned, or the sinusoidal encoding
    h_l+1   = h_l + MultiHead_l(h_l)           (+ MLP_l, optional, on the residual too)
    logits  = LayerNorm(h_L) W_U + b_U

(copy drops the residual connection, h_l+1 = MultiHead_l(h_l): with it, each token would
reach the output without attention, and no head would need to learn anything.)

Each MultiHead_l is a ``torch.nn.MultiheadAttention``, so ``run.params(l)`` is its
``MultiHeadWeights.from_torch`` and ``run.trace(x, l)`` is the engine on h_l with them: the
same weights and output torch computes (a test holds them equal to 1e-5).
"""

from __future__ import annotations

import copy
import math
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Callable, NamedTuple

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from attnviz.core.arrays import readonly
from attnviz.core.engine import AttentionTrace, trace_attention
from attnviz.core.errors import AttnvizInputError
from attnviz.core.inputs import sinusoidal_positions
from attnviz.models.trainer.toy_tasks import NO_TARGET, TASKS, Task, get_task, task_name
from attnviz.core.weights import MultiHeadWeights

__all__ = ["Checkpoint", "HeadScore", "Point", "StopTraining", "TASKS", "ToyConfig", "ToyRun",
           "make_config", "train", "train_config"]

POSITIONS = ("learned", "sinusoidal")
MAX_LENGTH, MAX_VOCAB, MAX_LAYERS, MAX_D_MODEL, MAX_STEPS = 64, 512, 4, 256, 100_000
CHECKPOINTS = 20          # intervals between saved weights: 21 checkpoints, step 0 included
EVALUATIONS = 50          # held-out evaluations (history points and on_step calls) per run
TEST_SEQUENCES = 512      # held-out sequences, drawn with a seed of their own
BATCH = 64
LEARNING_RATE = 1e-2      # at d_model 32 and below; wider models take a smaller one
BASE_WIDTH = 32           # (learning_rate: the width the learning rate was tuned at)
WEIGHT_DECAY = 0.1
WARMUP = 0.05             # share of the steps the learning rate ramps up over
MAX_GRAD_NORM = 1.0       # gradients are clipped to this norm: one bad batch cannot undo a run
TORCH_THREADS = 1         # intra-op threads while training (see _torch_threads)
DEFAULT_STEPS = {"copy": 1000, "reverse": 600, "sort": 1000, "shift": 300, "induction": 1000}


class StopTraining(Exception):
    """Raise from ``on_step`` (or return False) to end training after this step."""


class Point(NamedTuple):
    """One point of the training history."""

    step: int
    loss: float           # the training batch's cross-entropy at this step
    accuracy: float       # held-out accuracy, mean over scored positions


@dataclass(frozen=True)
class ToyConfig:
    """Everything that decides a run (with the seed, it decides it bit for bit)."""

    task: str
    length: int
    vocab: int
    layers: int
    heads: int
    d_model: int
    steps: int
    seed: int
    causal: bool
    positions: str = "learned"
    mlp: bool = False
    residual: bool = True     # h + attention(h); False: attention's output replaces h


@dataclass(frozen=True, eq=False)
class Checkpoint:
    """The whole model's parameters after `step` optimiser steps (step 0: the initial ones)."""

    step: int
    state: dict = field(repr=False)       # name → read-only float32 array (torch's state_dict)


class HeadScore(NamedTuple):
    """How well one head shows its layer's expected pattern on held-out sequences."""

    layer: int
    head: int
    hit_rate: float       # share of queries whose largest weight is on an expected key
    mean_weight: float    # mean weight on the expected key(s) (1.0 = perfectly sharp)


# ---- the model --------------------------------------------------------------------------------

class ToyTransformer(nn.Module):
    """Token embedding + positions, `layers` × (attention [+ MLP]) on a residual stream,
    LayerNorm and the output layer. forward(x (B, n) int64) → logits (B, n, vocab)."""

    def __init__(self, cfg: ToyConfig):
        super().__init__()
        d = cfg.d_model
        self.causal = cfg.causal
        self.residual = cfg.residual
        self.embed = nn.Embedding(cfg.vocab, d)
        if cfg.positions == "learned":
            self.positions = nn.Parameter(torch.empty(cfg.length, d))
        else:
            self.register_buffer("positions", torch.empty(cfg.length, d))
        self.attention = nn.ModuleList(
            nn.MultiheadAttention(d, cfg.heads, batch_first=True) for _ in range(cfg.layers))
        self.mlp = nn.ModuleList(
            nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
            for _ in range(cfg.layers if cfg.mlp else 0))
        self.norm = nn.LayerNorm(d)
        self.unembed = nn.Linear(d, cfg.vocab)

    def mask(self, n: int) -> torch.Tensor | None:
        """(n, n) bool, True = a future key the query may not see; None if not causal."""
        if not self.causal:
            return None
        return torch.triu(torch.ones(n, n, dtype=torch.bool), diagonal=1)

    def forward(self, x: torch.Tensor, streams: list | None = None) -> torch.Tensor:
        n = x.shape[1]
        mask = self.mask(n)
        h = self.embed(x) + self.positions[:n]                        # (B, n, d_model)
        for layer, attention in enumerate(self.attention):
            if streams is not None:
                streams.append(h)                                     # layer's input
            a, _ = attention(h, h, h, attn_mask=mask, need_weights=False)
            h = h + a if self.residual else a
            if self.mlp:
                h = h + self.mlp[layer](h)
        if streams is not None:
            streams.append(h)
        return self.unembed(self.norm(h))                             # (B, n, vocab)


# ---- training ---------------------------------------------------------------------------------

def train(task: str, *, length: int = 8, vocab: int = 10, layers: int = 1, heads: int = 2,
          d_model: int = 32, steps: int | None = None, seed: int = 0, causal: bool | None = None,
          on_step: Callable[[int, float, float], object] | None = None,
          positions: str = "learned", mlp: bool = False,
          residual: bool | None = None) -> "ToyRun":
    """Train a tiny transformer on `task` and keep its history and ~20 checkpoints.

    task      one of copy, reverse, sort, shift, induction (``TASKS``)
    length    tokens per sequence; vocab: tokens 0 … vocab − 1
    layers, heads, d_model   the model's size (d_model must divide by heads)
    steps     optimiser steps (batches of 64 fresh sequences); None = the task's default
    seed      decides the initial weights and every batch: the same seed gives the same run,
              bit for bit, also while other runs train on other threads
    causal    mask future keys; None = the task's own choice (shift and induction are causal)
    on_step   called as on_step(step, loss, accuracy) ~50 times; returning False or raising
              StopTraining ends training there (the run keeps what it has learnt so far)
    positions "learned" or "sinusoidal"; mlp: add a feed-forward layer after each attention
    residual  add each attention's output to its input; None = the task's choice (all but
              copy, which a residual connection would solve without attention)

    Trains on one torch thread (the matrices are tiny: a second thread only waits for the
    first) and gives the caller's thread setting back afterwards.
    """
    cfg = make_config(task, length=length, vocab=vocab, layers=layers, heads=heads,
                      d_model=d_model, steps=steps, seed=seed, causal=causal,
                      positions=positions, mlp=mlp, residual=residual)
    return train_config(cfg, on_step=on_step)


def train_config(config: ToyConfig, *, on_step: Callable[[int, float, float], object] | None
                 = None, should_stop: Callable[[], bool] | None = None) -> "ToyRun":
    """`train` with a configuration from `make_config`. `should_stop()` is asked after every
    optimiser step (the Train page: Stop pressed, or the learner gone); True ends training
    there, as on_step returning False does."""
    with _torch_threads():
        return _train(config, on_step, should_stop)


def _train(cfg: ToyConfig, on_step, should_stop) -> "ToyRun":
    spec = TASKS[cfg.task]
    train_seed, test_seed = np.random.SeedSequence(cfg.seed).spawn(2)
    data = np.random.default_rng(train_seed)
    test_x = spec.sample(np.random.default_rng(test_seed), TEST_SEQUENCES, cfg.length, cfg.vocab)
    model = _fresh_model(cfg, torch.Generator().manual_seed(cfg.seed))
    optimiser = torch.optim.AdamW(model.parameters(), lr=learning_rate(cfg),
                                  weight_decay=WEIGHT_DECAY)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimiser, _warmup_cosine(cfg.steps))
    saves = set(np.linspace(0, cfg.steps, CHECKPOINTS + 1).round().astype(int).tolist())
    evaluations = set(np.linspace(0, cfg.steps, EVALUATIONS + 1).round().astype(int)[1:].tolist())
    checkpoints, history = [_checkpoint(model, 0)], []
    step, stopped = 0, False
    while step < cfg.steps and not stopped:
        step += 1
        loss = _step(model, optimiser, spec, data, cfg)
        schedule.step()
        if step in evaluations:
            point = Point(step, loss.item(), _evaluate(model, spec, test_x)[1])
            history.append(point)
            stopped = _should_stop(on_step, point)
        stopped = stopped or (should_stop is not None and bool(should_stop()))
        if step in saves or stopped:
            checkpoints.append(_checkpoint(model, step))
    if checkpoints[-1].step != step:
        checkpoints.append(_checkpoint(model, step))
    per_position, mean = _evaluate(model, spec, test_x)
    return ToyRun(cfg, spec, tuple(history), tuple(checkpoints), readonly(per_position), mean,
                  readonly(test_x), stopped)


def seconds_per_step(cfg: ToyConfig, steps: int = 5) -> float:
    """Seconds one optimiser step of this configuration takes here and now (the median of
    `steps`, after one to warm up), on the thread count training uses."""
    spec = TASKS[cfg.task]
    data = np.random.default_rng(0)
    with _torch_threads():
        model = _fresh_model(cfg, torch.Generator().manual_seed(0))
        optimiser = torch.optim.AdamW(model.parameters(), lr=learning_rate(cfg))
        times = []
        for _ in range(steps + 1):
            start = time.perf_counter()
            _step(model, optimiser, spec, data, cfg)
            times.append(time.perf_counter() - start)
    return float(np.median(times[1:]))


def _step(model, optimiser, spec, data: np.random.Generator, cfg: ToyConfig):
    """One optimiser step on a fresh batch (gradients clipped to MAX_GRAD_NORM); the loss."""
    x = spec.sample(data, BATCH, cfg.length, cfg.vocab)
    loss = _loss(model, x, spec.targets(x))
    optimiser.zero_grad(set_to_none=True)
    loss.backward()
    nn.utils.clip_grad_norm_(model.parameters(), MAX_GRAD_NORM)
    optimiser.step()
    return loss


def learning_rate(cfg: ToyConfig) -> float:
    """AdamW's peak learning rate: LEARNING_RATE up to d_model BASE_WIDTH, then falling as
    1 / d_model. Adam moves every weight by about the learning rate whatever its gradient, so
    a matrix of width d changes its output about d times as much per step: at d_model 128,
    1e-2 threw the model off (the loss rose from 0.8 to 3.9, chance level)."""
    return LEARNING_RATE * min(1.0, BASE_WIDTH / cfg.d_model)


@contextmanager
def _torch_threads(n: int = TORCH_THREADS):
    """Train on `n` intra-op threads, then give the caller's setting back. torch's setting
    belongs to the calling thread (and is the default of threads started later), so runs on
    several threads at once each keep theirs."""
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _fresh_model(cfg: ToyConfig, generator: torch.Generator | None = None) -> ToyTransformer:
    """The model, built on the meta device (so torch's global generator, shared by every
    thread, is neither read nor moved) and then given memory: initialised from `generator`,
    the run's own, or left for a checkpoint to fill (None)."""
    with torch.device("meta"):
        model = ToyTransformer(cfg)
    model = model.to_empty(device="cpu")
    with torch.no_grad():
        if cfg.positions == "sinusoidal":
            model.positions.copy_(torch.tensor(sinusoidal_positions(cfg.length, cfg.d_model)))
        if generator is not None:
            _initialise(model, cfg, generator)
    return model


def _initialise(model: ToyTransformer, cfg: ToyConfig, g: torch.Generator) -> None:
    """torch's own initialisations (nn.Embedding, nn.MultiheadAttention, nn.Linear,
    nn.LayerNorm), drawn from the run's generator `g`, in a fixed order."""
    nn.init.normal_(model.embed.weight, generator=g)
    if cfg.positions == "learned":
        nn.init.normal_(model.positions, std=0.5, generator=g)
    for attention in model.attention:
        nn.init.xavier_uniform_(attention.in_proj_weight, generator=g)
        nn.init.zeros_(attention.in_proj_bias)
        _init_linear(attention.out_proj, g)
        nn.init.zeros_(attention.out_proj.bias)
    for mlp in model.mlp:
        _init_linear(mlp[0], g)
        _init_linear(mlp[2], g)
    nn.init.ones_(model.norm.weight)
    nn.init.zeros_(model.norm.bias)
    _init_linear(model.unembed, g)


def _init_linear(layer: nn.Linear, g: torch.Generator) -> None:
    """nn.Linear's reset_parameters, with the run's generator."""
    nn.init.kaiming_uniform_(layer.weight, a=math.sqrt(5), generator=g)
    bound = 1 / math.sqrt(layer.in_features)
    nn.init.uniform_(layer.bias, -bound, bound, generator=g)


def _should_stop(on_step, point: Point) -> bool:
    if on_step is None:
        return False
    try:
        return on_step(*point) is False
    except StopTraining:
        return True


def _warmup_cosine(steps: int):
    warmup = max(1, round(WARMUP * steps))

    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        return 0.5 * (1 + math.cos(math.pi * (step - warmup) / max(1, steps - warmup)))

    return factor


def _loss(model: ToyTransformer, x: np.ndarray, y: np.ndarray) -> torch.Tensor:
    logits = model(torch.tensor(x))                                   # (B, n, vocab)
    return F.cross_entropy(logits.flatten(0, 1), torch.tensor(y).flatten(),
                           ignore_index=NO_TARGET)


def _evaluate(model: ToyTransformer, spec: Task, x: np.ndarray) -> tuple[np.ndarray, float]:
    """Held-out accuracy: (n,) per position (NaN where the task scores nothing) and the mean
    over every scored answer."""
    y = spec.targets(x)                                               # (B, n)
    scored = y != NO_TARGET
    right = (_predict(model, x) == y) & scored
    counts = scored.sum(axis=0)
    per_position = np.full(x.shape[1], np.nan)
    np.divide(right.sum(axis=0), counts, out=per_position, where=counts > 0)
    return per_position, float(right.sum() / scored.sum())


@torch.no_grad()
def _predict(model: ToyTransformer, x: np.ndarray) -> np.ndarray:
    was_training = model.training
    model.eval()
    out = model(torch.tensor(x)).argmax(-1).numpy()
    model.train(was_training)
    return out


def _checkpoint(model: ToyTransformer, step: int) -> Checkpoint:
    state = {k: readonly(v.detach().numpy().copy()) for k, v in model.state_dict().items()}
    return Checkpoint(step, state)


# ---- the result -------------------------------------------------------------------------------

@dataclass(frozen=True, eq=False)
class ToyRun:
    """A finished (or stopped) training run: what it learnt, when, and every layer's attention.

    history      Points (step, loss, accuracy), ~50 of them
    checkpoints  Checkpoints at ~20 evenly spaced steps, the first at step 0, the last the end
    accuracy     (length,) held-out accuracy per position after training (NaN: not scored)
    mean_accuracy  held-out accuracy over every scored answer
    test_inputs  (512, length) the held-out sequences (drawn with a seed of their own)
    stopped      True if on_step ended training early
    """

    config: ToyConfig
    task: Task = field(repr=False)
    history: tuple[Point, ...] = field(repr=False)
    checkpoints: tuple[Checkpoint, ...] = field(repr=False)
    accuracy: np.ndarray
    mean_accuracy: float
    test_inputs: np.ndarray = field(repr=False)
    stopped: bool = False
    _models: dict = field(default_factory=dict, init=False, repr=False)   # step → torch model
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    @property
    def steps(self) -> int:
        """Optimiser steps done (fewer than config.steps if stopped)."""
        return self.checkpoints[-1].step

    @property
    def checkpoint_steps(self) -> list[int]:
        return [c.step for c in self.checkpoints]

    def model(self, step: int | None = None) -> ToyTransformer:
        """The torch model with the weights of checkpoint `step` (None = the end), in eval
        mode. Cached: do not train it."""
        checkpoint = self._checkpoint(step)
        with self._lock:
            if checkpoint.step not in self._models:
                model = _fresh_model(self.config)
                model.load_state_dict({k: torch.tensor(v) for k, v in checkpoint.state.items()})
                self._models[checkpoint.step] = model.eval().requires_grad_(False)
            return self._models[checkpoint.step]

    def params(self, layer: int, step: int | None = None) -> MultiHeadWeights:
        """Layer `layer`'s W_Q, W_K, W_V, W_O and biases at checkpoint `step` (None = end)."""
        return MultiHeadWeights.from_torch(self.model(step).attention[self._layer(layer)])

    def residual_stream(self, sequence, step: int | None = None) -> np.ndarray:
        """(layers + 1, n, d_model) float32: the input of each layer's attention, then the
        stack's output (before the final LayerNorm)."""
        x = self._sequence(sequence)
        streams: list = []
        with torch.no_grad():
            self.model(step)(torch.tensor(x[None]), streams)
        return readonly(torch.cat(streams).numpy())

    def trace(self, sequence, layer: int = 0, step: int | None = None) -> AttentionTrace:
        """The engine's trace of layer `layer`'s attention on `sequence`: its X is the model's
        own residual stream there, its weights the layer's (at checkpoint `step`)."""
        layer = self._layer(layer)
        x = self.residual_stream(sequence, step)[layer]                 # (n, d_model)
        return trace_attention(x, self.params(layer, step), causal=self.config.causal)

    def traces(self, sequence, step: int | None = None) -> list[AttentionTrace]:
        """One trace per layer."""
        return [self.trace(sequence, layer, step) for layer in range(self.config.layers)]

    def attentions(self, sequence, step: int | None = None) -> np.ndarray:
        """(layers, heads, n, n) every layer's attention weights on `sequence`."""
        return readonly(np.stack([t.weights for t in self.traces(sequence, step)]))

    def predict(self, sequence, step: int | None = None,
                params: dict[int, MultiHeadWeights] | None = None) -> np.ndarray:
        """(n,) the model's answer at each position (its most likely token). `params`
        {layer: MultiHeadWeights} replaces those layers' attention weights for this answer
        only, e.g. a head edited by hand: the layers after it then read what it now writes."""
        model = self.model(step) if not params else self._with_params(step, params)
        return _predict(model, self._sequence(sequence)[None])[0]

    def accuracy_of(self, inputs, step: int | None = None) -> np.ndarray:
        """(batch, n) 1.0 where the answer is right, 0.0 where wrong, NaN where not scored."""
        x = np.stack([self._sequence(s) for s in np.atleast_2d(inputs)])
        y = self.task.targets(x)
        right = (_predict(self.model(step), x) == y).astype(float)
        right[y == NO_TARGET] = np.nan
        return right

    def targets(self, sequence) -> np.ndarray:
        """(n,) the right answer at each position; NO_TARGET (−1) where none is scored."""
        return self.task.targets(self._sequence(sequence)[None])[0]

    def pattern(self, layer: int) -> str | None:
        """In words, what the task expects a head of `layer` to attend to (None: nothing)."""
        return self.task.pattern_of(self._layer(layer), self.config.layers)

    def expected(self, sequence, layer: int) -> np.ndarray | None:
        """(n, n) bool: the keys each query of `layer` is expected to attend to (a row with
        none has no expected key); None if the task expects nothing of this layer."""
        keys = self.task.expected_keys(self._sequence(sequence)[None], self._layer(layer),
                                       self.config.layers)
        return None if keys is None else keys[0]

    def head_scores(self, step: int | None = None, sequences: int = 128) -> list[HeadScore]:
        """Every head of every layer the task expects a pattern of, on the first `sequences`
        held-out sequences; best first (highest hit rate, then sharpest)."""
        x = self.test_inputs[:sequences]
        weights = self._batch_weights(x, step)                          # (L, B, H, n, n)
        scores = []
        for layer in range(self.config.layers):
            keys = self.task.expected_keys(x, layer, self.config.layers)  # (B, n, n)
            if keys is None:
                continue
            scored = keys.any(-1)                                       # (B, n)
            w = weights[layer].transpose(1, 0, 2, 3)                    # (H, B, n, n)
            top = np.take_along_axis(keys[None], w.argmax(-1)[..., None], -1)[..., 0]
            on_keys = (w * keys[None]).sum(-1)                          # (H, B, n)
            for head in range(w.shape[0]):
                scores.append(HeadScore(layer, head, float(top[head][scored].mean()),
                                        float(on_keys[head][scored].mean())))
        return sorted(scores, key=lambda s: (-s.hit_rate, -s.mean_weight))

    # ---- helpers ------------------------------------------------------------------------------
    def _batch_weights(self, x: np.ndarray, step: int | None) -> np.ndarray:
        """(layers, B, heads, n, n) attention weights from torch, for many sequences at once."""
        model = self.model(step)
        streams: list = []
        out = []
        with torch.no_grad():
            model(torch.tensor(x), streams)
            mask = model.mask(x.shape[1])
            for attention, h in zip(model.attention, streams):
                _, w = attention(h, h, h, attn_mask=mask, need_weights=True,
                                 average_attn_weights=False)
                out.append(w.numpy())
        return np.stack(out)

    def _with_params(self, step: int | None, params: dict) -> ToyTransformer:
        """A copy of the model at `step` with some layers' attention weights replaced."""
        model = copy.deepcopy(self.model(step))
        for layer, w in params.items():
            own = self.params(self._layer(layer), step)
            if not isinstance(w, MultiHeadWeights) or any(
                    getattr(w, n) != getattr(own, n) for n in
                    ("num_heads", "d_model", "d_context", "d_k", "d_v", "d_out")) \
                    or w.b_q is None or w.b_k is None or w.b_v is None or w.b_o is None:
                raise AttnvizInputError("error.toy.layer_weights", layer=layer, heads=own.num_heads,
                                        d_model=own.d_model, d_k=own.d_k)
            with torch.no_grad():
                model.attention[layer].load_state_dict(w.to_torch().state_dict())
        return model

    def _checkpoint(self, step: int | None) -> Checkpoint:
        if step is None:
            return self.checkpoints[-1]
        for c in self.checkpoints:
            if c.step == step:
                return c
        raise AttnvizInputError("error.toy.no_checkpoint", step=repr(step),
                                steps=", ".join(map(str, self.checkpoint_steps)))

    def _layer(self, layer) -> int:
        if isinstance(layer, bool) or not isinstance(layer, (int, np.integer)) \
                or not 0 <= layer < self.config.layers:
            raise AttnvizInputError("error.toy.layer_index", high=self.config.layers - 1,
                                    value=repr(layer))
        return int(layer)

    def _sequence(self, sequence) -> np.ndarray:
        """A sequence of token ids as a (n,) int64 array, checked against the model's sizes."""
        x = np.asarray(sequence)
        n, vocab = self.config.length, self.config.vocab
        if x.ndim != 1 or not 1 <= x.shape[0] <= n:
            raise AttnvizInputError("error.toy.sequence_shape", n=n, shape=x.shape)
        if not (np.issubdtype(x.dtype, np.integer)
                or (np.issubdtype(x.dtype, np.floating) and np.all(x == np.round(x)))):
            raise AttnvizInputError("error.toy.sequence_dtype", dtype=str(x.dtype))
        if x.min() < 0 or x.max() >= vocab:
            raise AttnvizInputError("error.toy.token_range", high=vocab - 1, vocab=vocab,
                                    found=int(x.min() if x.min() < 0 else x.max()))
        return x.astype(np.int64)


# ---- checking the arguments -------------------------------------------------------------------

def make_config(task: str, *, length: int = 8, vocab: int = 10, layers: int = 1,
                heads: int = 2, d_model: int = 32, steps: int | None = None, seed: int = 0,
                causal: bool | None = None, positions: str = "learned", mlp: bool = False,
                residual: bool | None = None) -> ToyConfig:
    """The checked configuration `train` would use for these arguments (the same ones, minus
    on_step), with the task's defaults filled in; AttnvizInputError says what is wrong."""
    spec = get_task(task)
    length = _whole(length, "length", 2, MAX_LENGTH)
    vocab = _whole(vocab, "vocab", 2, MAX_VOCAB)
    layers = _whole(layers, "layers", 1, MAX_LAYERS)
    d_model = _whole(d_model, "d_model", 1, MAX_D_MODEL)
    heads = _whole(heads, "heads", 1, d_model)
    if d_model % heads:
        raise AttnvizInputError("error.toy.head_dim", d_model=d_model, heads=heads)
    steps = DEFAULT_STEPS[spec.name] if steps is None else _whole(steps, "steps", 1, MAX_STEPS)
    seed = _whole(seed, "seed", 0, 2**63 - 1)
    if layers < spec.min_layers:
        raise AttnvizInputError("error.toy.min_layers", task=task_name(spec.name),
                                low=spec.min_layers, value=layers)
    causal = _flag(causal, "causal", spec.causal)
    residual = _flag(residual, "residual", spec.residual)
    if spec.name == "induction" and length < 3:
        raise AttnvizInputError("error.toy.induction_length")
    if spec.name == "induction" and not causal:
        raise AttnvizInputError("error.toy.induction_causal")
    if positions not in POSITIONS:
        raise AttnvizInputError("error.figure.one_of", name="positions",
                                allowed=", ".join(POSITIONS), value=repr(positions))
    return ToyConfig(spec.name, length, vocab, layers, heads, d_model, steps, seed, causal,
                     positions, _flag(mlp, "mlp", False), residual)


def _flag(value, name: str, default: bool) -> bool:
    if value is None:
        return default
    if not isinstance(value, (bool, np.bool_)):
        raise AttnvizInputError("error.toy.flag", name=name, value=repr(value))
    return bool(value)


def _whole(value, name: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise AttnvizInputError("error.toy.whole", name=name, value=repr(value))
    if not low <= value <= high:
        raise AttnvizInputError("error.toy.range", name=name, low=low, high=high, value=value)
    return int(value)
