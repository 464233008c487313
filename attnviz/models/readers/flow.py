"""Information flow routes (Ferrando & Voita 2024, "Information Flow Routes", arXiv 2403.00824)
on a decoder: which earlier tokens, heads and MLPs the residual stream at one position was built
from, as a graph over (row, position) nodes with an importance on every edge.

Each sublayer adds to the residual stream a sum of parts; each part's share of the result is
its proximity to it (from ALTI, Ferrando et al. 2022):

    resid_mid_i  = resid_pre_i + Σ_h Σ_{j ≤ i} α^h_ij f_h(x_j)      the attention sublayer
    f_h(x_j)     = (RMSNorm(resid_pre_j) · g W_V^{kv(h)}) W_O^h      head h's value of token j
                   (the key/value head kv(h) = h // (H / H_kv) it reads) times its rows of W_O
    resid_post_i = resid_mid_i + mlp_out_i                          the MLP sublayer

(with a norm after attention, Gemma's: each head term α^h_ij / r_i · (f_h(x_j) ⊙ g), r_i the
norm's one number at i and g its gain, so the terms still sum to what joins: ``head_terms``;
mlp_out is the MLP's output after its own norm)
    proximity(z, y)  = max(0, ‖y‖₁ − ‖y − z‖₁)
    importance(z, y) = proximity(z, y) / Σ_{z'} proximity(z', y)    over the parts z' of y

so the importances of a node's incoming edges sum to 1 (a node none of whose parts is near it
— every proximity 0 — gives its residual edge 1). heads=False is the paper's token-level view:
one part per earlier token j, Σ_h α^h_ij f_h(x_j) (edge kind "attn", head −1).

Nodes are (row, position), rows 0 … 2L: row 2ℓ is resid_pre of layer ℓ, 2ℓ + 1 its resid_mid,
2L the stream after the last layer. An edge is (layer, source, target, kind, head, weight):
"head" (j → i through head h) and "attn_residual" (i → i) from row 2ℓ to 2ℓ + 1, "mlp" and
"mlp_residual" (i → i) from row 2ℓ + 1 to 2ℓ + 2; head is −1 but for "head". The graph of a
position: from (2L, position) down, every edge of importance ≥ threshold into a node kept;
a node is kept if it is the top one or the source of a kept edge. With `max_edges`, only the
graph's max_edges most important edges are kept (``total_edges`` says how many it had: at
threshold 0, 549,027 for 64 tokens), and the nodes are their ends and the top one. The walk
is numpy over each layer's (H, n, n) importances: only the edges kept become Python tuples.

One forward pass (``DecoderModel.run_layers`` with a reading hook: resid_pre, v, pattern,
resid_mid, mlp_out), then layer by layer the parts' L1 distances, one position i at a time:
head h's part of i is α^h_ij f_h(x_j), so each distance needs its whole vector, and only one
row's (H, i + 1, d_model) are held, in one buffer. ``graph`` walks again with
another position or threshold without recomputing. A number that is not finite stops the
forward pass with error.model.not_finite naming its layer and step (``models.finite``); the
importances are then only ever computed from finite numbers.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace

import numpy as np

from attnviz.core.arrays import readonly, whole_number
from attnviz.core.errors import AttnvizInputError
from attnviz.core.grouped_query import repeat_kv
from attnviz.models.finite import quiet
from attnviz.models.readers.lens import text_ids

__all__ = ["EDGE_COLUMNS", "KINDS", "NODE_COLUMNS", "SAME", "InformationFlow", "head_terms",
           "information_flow", "proximities"]

KINDS = ("head", "attn", "attn_residual", "mlp", "mlp_residual")
EDGE_COLUMNS = ("layer", "source", "target", "kind", "head", "weight")   # an edge's fields
NODE_COLUMNS = ("row", "position")                                        # a node's
SAME = object()             # graph(max_edges=SAME): the flow's own bound
_DTYPE = np.float32
_READ = ("resid_pre", "v", "pattern", "resid_mid", "mlp_out")

Edge = tuple[int, int, int, str, int, float]      # (layer, source, target, kind, head, weight)

# what the exports' fields are (the JSON's "fields", the .npz's "about")
_EDGE_ABOUT = {
    "layer": "the layer ℓ (0 … L − 1) the edge belongs to",
    "source": "the position the edge comes from (a token index)",
    "target": "the position the edge goes to (a token index, ≥ source)",
    "kind": "head: head h's term from token source in resid_mid of target (row 2ℓ → 2ℓ + 1); "
            "attn: every head's, summed (heads=False); attn_residual: resid_pre's share of "
            "resid_mid; mlp: the MLP output's share of resid_post (row 2ℓ + 1 → 2ℓ + 2); "
            "mlp_residual: resid_mid's share of resid_post",
    "head": "the head of a 'head' edge (0 … H − 1); −1 for every other kind",
    "weight": "the importance: the part's proximity max(0, ‖y‖₁ − ‖y − z‖₁) to the sum y it "
              "is part of, over the sum of the proximities of y's parts (a node's incoming "
              "edges sum to 1)"}
JSON_FIELDS = {
    "model": "the model's file", "tokens": "the text's tokens, as the model reads them",
    "ids": "their token ids", "position": "the graph's top position (a token index)",
    "threshold": "the least importance of an edge kept",
    "heads": "true: one edge per head and token; false: the heads of a layer summed",
    "num_layers": "L, the model's layers: rows 0 … 2L",
    "max_edges": "the most edges kept (the most important ones; null: no bound)",
    "total_edges": "the edges of importance ≥ threshold the walk from the top reaches",
    "left_out": "total_edges − the edges kept: the least important, left out by max_edges",
    "nodes": "the graph's nodes: the residual stream at (row, position), row 2ℓ before layer "
             "ℓ, 2ℓ + 1 after its attention, 2L after the last layer",
    "edges": "the graph's edges, by layer descending, then weight descending",
    "nodes[].row": "the node's row (0 … 2L)", "nodes[].position": "the node's position",
    **{f"edges[].{name}": about for name, about in _EDGE_ABOUT.items()}}
ARRAYS_ABOUT = {
    **{name: about for name, about in JSON_FIELDS.items() if "[" not in name and name not in
       ("nodes", "edges", "left_out", "num_layers")},
    "max_edges": "the most edges kept (the most important ones); −1: no bound",
    "head_weights": "(L, H, n, n) float32: [ℓ, h, i, j] head h's term from token j in "
                    "resid_mid_i, its importance (0 for j > i)",
    "token_weights": "(L, n, n) float32: [ℓ, i, j] the heads' terms from token j summed, in "
                     "resid_mid_i, its importance (0 for j > i)",
    "attn_residual": "(L, n) float32: resid_pre_i's importance in resid_mid_i",
    "mlp": "(L, n) float32: mlp_out_i's importance in resid_post_i",
    "mlp_residual": "(L, n) float32: resid_mid_i's importance in resid_post_i",
    "node_row": "(N,) the graph's nodes' rows: 2ℓ before layer ℓ, 2ℓ + 1 after its "
                "attention, 2L after the last layer",
    "node_position": "(N,) the graph's nodes' positions",
    "kinds": "the edge kinds, in the order edge_kind counts them",
    **{f"edge_{name}": f"(E,) {about}" for name, about in _EDGE_ABOUT.items() if name != "kind"},
    "edge_kind": "(E,) an index of kinds: " + _EDGE_ABOUT["kind"],
    "about": "this text: what every array is"}


@dataclass(frozen=True, eq=False)
class InformationFlow:
    """The information flow of one text: every edge's importance, and the graph of `position`.

    L layers, H heads, n tokens. head_weights (L, H, n, n) float32 (heads=True; None else):
    [ℓ, h, i, j] the importance of head h's term from token j in resid_mid_i, 0 above the
    diagonal; token_weights (L, n, n) float32 (heads=False; None else): the same for the sum
    over heads. attn_residual (L, n): resid_pre_i's importance in resid_mid_i; mlp, mlp_residual
    (L, n): mlp_out_i's and resid_mid_i's in resid_post_i. position (0 … n − 1), threshold:
    the graph's; nodes: its kept (row, position) pairs, top row first; edges: its kept edges,
    by layer descending, then weight descending.
    """

    ids: np.ndarray
    tokens: list[str]
    heads: bool
    position: int
    threshold: float
    head_weights: np.ndarray | None = field(repr=False)
    token_weights: np.ndarray | None = field(repr=False)
    attn_residual: np.ndarray = field(repr=False)
    mlp: np.ndarray = field(repr=False)
    mlp_residual: np.ndarray = field(repr=False)
    nodes: tuple[tuple[int, int], ...] = field(repr=False)
    edges: list[Edge] = field(repr=False)
    max_edges: int | None = None
    total_edges: int = 0
    model: str = ""

    @property
    def left_out(self) -> int:
        """How many of the graph's edges the bound `max_edges` left out (the least important)."""
        return self.total_edges - len(self.edges)

    @property
    def num_layers(self) -> int:
        return self.attn_residual.shape[0]

    @property
    def top(self) -> tuple[int, int]:
        """The graph's top node: (2L, position)."""
        return 2 * self.num_layers, self.position

    def graph(self, position: int | None = None, threshold: float | None = None,
              max_edges: int | None | object = SAME) -> "InformationFlow":
        """The same importances walked from another `position`, with another `threshold` or
        bound `max_edges` (None: no bound; position, threshold None or max_edges SAME: this
        one's): no model run, a few milliseconds."""
        position = self.position if position is None else position
        threshold = self.threshold if threshold is None else threshold
        max_edges = self.max_edges if max_edges is SAME else max_edges
        position, threshold = _check_graph(position, threshold, len(self.ids))
        max_edges = _check_bound(max_edges)
        nodes, edges, total = _walk(self, position, threshold, max_edges)
        return replace(self, position=position, threshold=threshold, nodes=nodes,
                       edges=edges, max_edges=max_edges, total_edges=total)

    def to_json(self) -> str:
        """The graph and its settings as JSON: model, tokens, ids, position, threshold, heads,
        num_layers, max_edges, total_edges, left_out, nodes [{row, position}, …], edges
        [{layer, source, target, kind, head, weight}, …] and `fields`, what each of them is."""
        return json.dumps({
            "model": self.model, "tokens": list(self.tokens),
            "ids": [int(i) for i in self.ids], "position": self.position,
            "threshold": self.threshold, "heads": self.heads, "num_layers": self.num_layers,
            "max_edges": self.max_edges, "total_edges": self.total_edges,
            "left_out": self.left_out,
            "nodes": [dict(zip(NODE_COLUMNS, node)) for node in self.nodes],
            "edges": [dict(zip(EDGE_COLUMNS, edge)) for edge in self.edges],
            "fields": JSON_FIELDS}, ensure_ascii=False)

    def arrays(self) -> dict[str, np.ndarray]:
        """Every array, for ``np.savez`` (no pickles), each named for what it is (`about`, a
        JSON text, says it in words): the settings (model, tokens, ids, position, threshold,
        heads, max_edges — −1 for none —, total_edges), the importances (head_weights or
        token_weights, attn_residual, mlp, mlp_residual), the graph's nodes as node_row and
        node_position (N,) and its edges as one (E,) array a column: edge_layer,
        edge_source, edge_target, edge_kind (an index of `kinds`), edge_head, edge_weight."""
        kind_index = {kind: k for k, kind in enumerate(KINDS)}
        nodes = np.array(self.nodes, dtype=np.int64).reshape(-1, 2)
        columns = list(zip(*self.edges)) or [()] * len(EDGE_COLUMNS)
        out = {"model": np.array(self.model), "tokens": np.array(self.tokens, dtype=str),
               "ids": np.asarray(self.ids), "position": np.array(self.position),
               "threshold": np.array(self.threshold), "heads": np.array(self.heads),
               "max_edges": np.array(-1 if self.max_edges is None else self.max_edges),
               "total_edges": np.array(self.total_edges),
               "attn_residual": self.attn_residual, "mlp": self.mlp,
               "mlp_residual": self.mlp_residual,
               "node_row": nodes[:, 0], "node_position": nodes[:, 1], "kinds": np.array(KINDS),
               "edge_kind": np.array([kind_index[k] for k in columns[3]], dtype=np.int64),
               "edge_weight": np.array(columns[5], dtype=_DTYPE)}
        for name in ("layer", "source", "target", "head"):
            out[f"edge_{name}"] = np.array(columns[EDGE_COLUMNS.index(name)], dtype=np.int64)
        if self.heads:
            out["head_weights"] = self.head_weights
        else:
            out["token_weights"] = self.token_weights
        out["about"] = np.array(json.dumps({k: ARRAYS_ABOUT[k] for k in [*out, "about"]}))
        return out


@quiet
def information_flow(model, ids_or_text, *, position: int = -1, threshold: float = 0.04,
                     heads: bool = True, max_tokens: int | None = None,
                     max_edges: int | None = None) -> InformationFlow:
    """The information flow of a text (or token ids) on a ``DecoderModel``; see the module's
    docstring. position: the graph's top position (negative: from the end; −1 the last);
    threshold: the least importance an edge kept has, 0 … 1; heads: one part per head and
    token (True) or per token, summed over the heads (False, the paper's view); max_tokens:
    read at most this many tokens (None: the model's limit, 512); max_edges: keep at most this
    many of the graph's edges, the most important (None: every one)."""
    ids = text_ids(model, ids_or_text)
    limit = model.max_tokens if max_tokens is None else \
        whole_number(max_tokens, "max_tokens", low=1, high=model.max_tokens)
    ids = ids[:limit]
    position, threshold = _check_graph(position, threshold, len(ids))
    max_edges = _check_bound(max_edges)
    if not isinstance(heads, (bool, np.bool_)):
        raise AttnvizInputError("error.flow.heads", value=repr(heads))
    n, layers, h_count = len(ids), model.num_layers, model.num_heads
    attn_shape = (layers, h_count, n, n) if heads else (layers, n, n)
    attn = np.empty(attn_shape, _DTYPE)
    attn_residual, mlp, mlp_residual = (np.empty((layers, n), _DTYPE) for _ in range(3))
    reads = _forward(model, ids)
    for layer, read in enumerate(reads):
        pattern, parts = head_terms(model, layer, read["pattern"][0], read["v"][0])
        resid_pre, resid_mid = read["resid_pre"][0], read["resid_mid"][0]   # (n, d_model)
        near = proximities(resid_mid, pattern, parts, summed=not heads)   # ([H,] n, n)
        attn[layer], attn_residual[layer] = _shares(near, _proximity(resid_pre, resid_mid),
                                                    node_axis=near.ndim - 2)
        mlp_out = read["mlp_out"][0]
        resid_post = resid_mid + mlp_out                               # as the layer adds
        near_mlp, near_mid = _proximity(mlp_out, resid_post), _proximity(resid_mid, resid_post)
        mlp[layer], mlp_residual[layer] = _shares(near_mlp, near_mid, node_axis=0)
    tokens, _, _ = model.labels(ids)
    flow = InformationFlow(
        ids=readonly(ids), tokens=tokens, heads=bool(heads), position=position,
        threshold=threshold, head_weights=readonly(attn) if heads else None,
        token_weights=None if heads else readonly(attn),
        attn_residual=readonly(attn_residual), mlp=readonly(mlp),
        mlp_residual=readonly(mlp_residual), nodes=(), edges=[], model=model.path.name)
    return flow.graph(max_edges=max_edges)


def proximities(y: np.ndarray, pattern: np.ndarray, parts: np.ndarray, *,
                summed: bool = False) -> np.ndarray:
    """(H, n, n) float32: [h, i, j] = max(0, ‖y_i‖₁ − ‖y_i − α^h_ij f_h(x_j)‖₁) for j ≤ i, 0
    above the diagonal. y (n, d_model): the sums (resid_mid); pattern (H, n, n): α; parts
    (H, n, d_model): f_h(x_j). summed: one part per token, Σ_h α^h_ij f_h(x_j) → (n, n).
    Row i at a time, over its keys j ≤ i only, in one buffer of (H, n, d_model) floats."""
    h_count, n, d = parts.shape
    out = np.zeros((1 if summed else h_count, n, n), _DTYPE)
    norms = np.abs(y).sum(axis=-1)                                     # (n,) ‖y_i‖₁
    by_key = parts.transpose(1, 0, 2)                                  # (n, H, d_model)
    buffer = np.empty(out.shape[0] * n * d, _DTYPE)
    for i in range(n):
        keys = i + 1
        buf = buffer[:out.shape[0] * keys * d].reshape(-1, keys, d)    # ([H|1], keys, d_model)
        if summed:                                     # (keys, 1, H) @ (keys, H, d_model)
            np.matmul(pattern[:, i, :keys].T[:, None, :], by_key[:keys],
                      out=buf.reshape(keys, 1, d))
        else:
            np.multiply(pattern[:, i, :keys, None], parts[:, :keys], out=buf)
        np.subtract(y[i], buf, out=buf)
        np.abs(buf, out=buf)
        out[:, i, :keys] = norms[i] - buf.sum(axis=-1)
    np.maximum(out, 0, out=out)
    return out[0] if summed else out


# ---- pieces -------------------------------------------------------------------------------------

def _check_graph(position, threshold, n: int) -> tuple[int, float]:
    """position as 0 … n − 1 (negative counts from the end), threshold as a float in 0 … 1."""
    position = whole_number(position, "position", low=-n, high=n - 1) % n
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float, np.number)) \
            or not 0 <= threshold <= 1:                                 # NaN fails too
        raise AttnvizInputError("error.flow.threshold", value=repr(threshold))
    return position, float(threshold)


def _check_bound(max_edges) -> int | None:
    """max_edges as None (no bound) or a whole number ≥ 1."""
    return None if max_edges is None else whole_number(max_edges, "max_edges", low=1)


def _forward(model, ids: np.ndarray) -> list[dict[str, np.ndarray]]:
    """One pass over the layers: each layer's resid_pre, v, pattern, resid_mid, mlp_out
    (copies, batch axis kept)."""
    reads = [dict() for _ in range(model.num_layers)]

    def read(layer: int, name: str, value: np.ndarray) -> None:
        if name in _READ:
            reads[layer][name] = np.array(value, dtype=_DTYPE)

    model.run_layers(model.token_embeddings(ids), hook=read)
    return reads


def head_terms(model, layer: int, pattern: np.ndarray, v: np.ndarray
               ) -> tuple[np.ndarray, np.ndarray]:
    """(α (H, n, n), f (H, n, d_model)) with attn_out_i = Σ_h Σ_{j ≤ i} α^h_ij f_h(x_j): the
    attention sublayer's output as the sum of one term per head and token. Without a norm after
    attention, α is the pattern and f_h(x_j) = v^{kv(h)}_j W_O^h. With one (Gemma's post-norm,
    gain g): the norm divides the whole sum at i by one number, r_i = √(mean(a_i²) + ε) of the
    sum a_i before it, and scales it by g, so each term is α^h_ij / r_i · (f_h(x_j) ⊙ g), which
    still sum exactly to what joins the stream."""
    parts = _head_values(model, layer, v)                              # (H, n, d_model)
    gain = model.attention_output_norm(layer)
    if gain is None:
        return pattern, parts
    before = np.einsum("hij,hjd->id", pattern, parts)                  # (n, d_model) a_i
    r = np.sqrt(np.mean(before * before, axis=-1) + _DTYPE(model.config.rms_eps))   # (n,)
    return (pattern / r[None, :, None]).astype(_DTYPE), (parts * gain).astype(_DTYPE)


def _head_values(model, layer: int, v: np.ndarray) -> np.ndarray:
    """(H, n, d_model): f_h(x_j) = v^{kv(h)}_j W_O^h, v (H_kv, n, d_k) the layer's values."""
    w_o = model.layer_weights(layer).w_o                               # (H d_v, d_model)
    h_count = model.num_heads
    d_v = w_o.shape[0] // h_count
    w_o = w_o.reshape(h_count, d_v, -1)                                # (H, d_v, d_model)
    shared = repeat_kv(v, h_count)                                     # (H, n, d_v)
    return shared @ w_o                                                # (H, n, d_model)


def _proximity(z: np.ndarray, y: np.ndarray) -> np.ndarray:
    """(n,): max(0, ‖y_i‖₁ − ‖y_i − z_i‖₁) for rows z, y (n, d_model)."""
    return np.maximum((np.abs(y) - np.abs(y - z)).sum(axis=-1), 0)


def _shares(near: np.ndarray, near_residual: np.ndarray, node_axis: int):
    """Each part's proximity over the sum of its node's: the parts' `near` (the nodes along
    `node_axis`) and the residual's (n,). A node whose every proximity is 0 gives its
    residual 1."""
    others = tuple(a for a in range(near.ndim) if a != node_axis)
    total = near.sum(axis=others) + near_residual                      # (n,)
    empty = total == 0
    scale = np.where(empty, 1, total)
    shape = [1] * near.ndim
    shape[node_axis] = -1
    return ((near / scale.reshape(shape)).astype(_DTYPE),
            np.where(empty, 1, near_residual / scale).astype(_DTYPE))


def _walk(flow: InformationFlow, position: int, threshold: float, max_edges: int | None):
    """The nodes and edges kept from (2L, position) down (see the module's docstring), and how
    many edges the graph has before the bound `max_edges`. Each layer's edges are found with
    numpy and held as columns; with a bound, the max_edges of largest weight are kept (on a
    tie at the cut, the one the walk met first: the higher layer; then mlp, mlp_residual,
    attn_residual, the heads), and only those become tuples."""
    layers, n = flow.num_layers, len(flow.ids)
    causal = np.tri(n, dtype=bool)                                     # (n_i, n_j): j ≤ i
    kept = np.zeros(n, dtype=bool)                                     # positions of this row
    kept[position] = True
    found = []                                  # (layer, source, target, kind, head, weight)
    for layer in range(layers - 1, -1, -1):
        # the MLP sublayer: (2ℓ + 1, i) → (2ℓ + 2, i)
        below = np.zeros(n, dtype=bool)
        for kind in ("mlp", "mlp_residual"):
            i = np.flatnonzero(kept & (getattr(flow, kind)[layer] >= threshold))
            found.append(_columns(layer, i, i, kind, -1, getattr(flow, kind)[layer][i]))
            below[i] = True
        kept = below
        # the attention sublayer: (2ℓ, j) → (2ℓ + 1, i)
        below = np.zeros(n, dtype=bool)
        i = np.flatnonzero(kept & (flow.attn_residual[layer] >= threshold))
        found.append(_columns(layer, i, i, "attn_residual", -1, flow.attn_residual[layer][i]))
        below[i] = True
        if flow.heads:
            w = flow.head_weights[layer]                                # (H, n, n)
            h, i, j = np.nonzero((w >= threshold) & kept[None, :, None] & causal[None])
            found.append(_columns(layer, j, i, "head", h, w[h, i, j]))
        else:
            w = flow.token_weights[layer]                               # (n, n)
            i, j = np.nonzero((w >= threshold) & kept[:, None] & causal)
            found.append(_columns(layer, j, i, "attn", -1, w[i, j]))
        below[j] = True
        kept = below
    layer, source, target, kind, head, weight = (np.concatenate(c) for c in zip(*found))
    total = len(weight)
    if max_edges is not None and total > max_edges:
        pick = np.argsort(-weight, kind="stable")[:max_edges]          # the heaviest, ties: first
        layer, source, target, kind, head, weight = (
            c[pick] for c in (layer, source, target, kind, head, weight))
    # by layer descending, then weight descending (then kind, target, source, head)
    order = np.lexsort((head, source, target, kind, -weight, -layer))
    edges = [(l, s, t, KINDS[k], h, w) for l, s, t, k, h, w in zip(
        *(c[order].tolist() for c in (layer, source, target, kind, head, weight)))]
    return _nodes(flow, position, layer, source, target, kind), edges, total


def _columns(layer: int, source, target, kind: str, head, weight) -> tuple[np.ndarray, ...]:
    """One block of edges as columns: layer, source, target, kind (an index of KINDS), head,
    weight, each (e,)."""
    e = len(weight)
    return (np.full(e, layer), np.asarray(source), np.asarray(target),
            np.full(e, KINDS.index(kind)), np.broadcast_to(head, (e,)).astype(np.int64),
            np.asarray(weight, dtype=_DTYPE))


def _nodes(flow: InformationFlow, position: int, layer, source, target, kind):
    """The top node and both ends of every edge, as (row, position), top row first."""
    n = len(flow.ids)
    row = 2 * layer + (kind >= KINDS.index("mlp"))                     # the source's row
    top = 2 * flow.num_layers * n + position
    cells = np.unique(np.concatenate([[top], row * n + source, (row + 1) * n + target]))
    rows, positions = np.divmod(cells, n)
    order = np.lexsort((positions, -rows))
    return tuple(zip(rows[order].tolist(), positions[order].tolist()))
