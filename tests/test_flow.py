"""Information flow routes on SmolLM2 (issue 28.3; Ferrando & Voita 2024), held to transformers
loading the same GGUF: each layer's attention output split here (float64) into one term per
(head, earlier token) from transformers' own attention weights, value projections and o_proj
slices, read with its forward hooks; the terms and the residual sum back to transformers'
resid_mid, and the proximity formula applied here to those terms gives attnviz's importances.
Then the normalisation, the graph walk (checked against a walk written here from the
definition), the errors, the exports and the figure. Expected numbers never come from attnviz."""

import json

import numpy as np
import pytest

from attnviz.models.readers.flow import KINDS
from attnviz.plot.flow_figures import MAX_WIDTH, MIN_WIDTH, flow_graph
from tests.hf_reference import hf_activations
from tests.message_helpers import message_pattern, raises_message

PROMPT = "The Eiffel Tower is in the city of"
OTHER = "def add(a, b):\n    return a + b  # 早上好"
LAYERS = (0, 14, 29)
SUM_ATOL = 1e-4             # the bound: the parts sum back to the next residual …
SUM_RTOL = 1e-6             # … or float32's own rounding of a large number: the first token's
                            # dimension 507 is 22,519 in transformers' resid_mid, where float32
                            # numbers are 0.002 apart (seen: 3e-4 off, 1.3e-8 relative)
WEIGHT_ATOL = 1e-4          # importances against the formula applied to transformers' terms


# ---- against transformers ---------------------------------------------------------------------

def _hf_parts(hf_decoder, ids, layers):
    """For each of `layers`, from transformers' own activations (its forward hooks) and o_proj
    weight: resid_pre, resid_mid, resid_post (n, d) and the head terms (H, n_i, n_j, d)
    α^h_ij · v^{kv(h)}_j W_O^h, in float64."""
    model, _ = hf_decoder
    h_count = model.config.num_attention_heads
    got = hf_activations(hf_decoder, ids, layers)
    parts = {}
    for layer in layers:
        alpha = got[(layer, "pattern")][0].astype(np.float64)          # (H, n, n)
        v = got[(layer, "v")][0].astype(np.float64)                    # (H_kv, n, d_v)
        d_v = v.shape[-1]
        w_o = model.model.layers[layer].self_attn.o_proj.weight.detach().double().numpy()
        values = np.stack([v[h // (h_count // len(v))] @ w_o[:, h * d_v:(h + 1) * d_v].T
                           for h in range(h_count)])                   # (H, n_j, d)
        parts[layer] = {name: got[(layer, f"resid_{name}")][0].astype(np.float64)
                        for name in ("pre", "mid", "post")}
        parts[layer]["terms"] = alpha[..., None] * values[:, None, :, :]   # (H, n_i, n_j, d)
    return parts


def _proximity(z, y):
    """max(0, ‖y‖₁ − ‖y − z‖₁) over the last axis, y broadcast against z."""
    return np.maximum(np.abs(y).sum(-1) - np.abs(y - z).sum(-1), 0)


@pytest.mark.slow
@pytest.mark.parametrize("text", [PROMPT, OTHER])
def test_the_parts_sum_back_and_their_importances_are_the_proximity_formula(
        decoder, hf_decoder, text):
    ids = decoder.encode(text)
    hf = _hf_parts(hf_decoder, ids, LAYERS)
    f = decoder.information_flow(ids)
    tokens = decoder.information_flow(ids, heads=False)
    for layer in LAYERS:
        pre, mid, post, terms = (hf[layer][k] for k in ("pre", "mid", "post", "terms"))
        n = len(ids)
        assert np.all(terms[:, np.triu_indices(n, 1)[0], np.triu_indices(n, 1)[1]] == 0)
        # the decomposition: Σ_h Σ_j α f + resid_pre = transformers' resid_mid
        np.testing.assert_allclose(terms.sum(axis=(0, 2)) + pre, mid, atol=SUM_ATOL,
                                   rtol=SUM_RTOL)
        # the importances: the proximity of each part to resid_mid, normalised
        y = mid[None, :, None, :]
        near_heads = _proximity(terms, y)                               # (H, n_i, n_j)
        near_residual = _proximity(pre, mid)                            # (n,)
        total = near_heads.sum(axis=(0, 2)) + near_residual
        np.testing.assert_allclose(f.head_weights[layer], near_heads / total[None, :, None],
                                   atol=WEIGHT_ATOL, rtol=0)
        np.testing.assert_allclose(f.attn_residual[layer], near_residual / total,
                                   atol=WEIGHT_ATOL, rtol=0)
        # the token-level view: the heads' terms of each token summed, one part
        near_tokens = _proximity(terms.sum(axis=0), mid[:, None, :])     # (n_i, n_j)
        total = near_tokens.sum(axis=1) + near_residual
        np.testing.assert_allclose(tokens.token_weights[layer], near_tokens / total[:, None],
                                   atol=WEIGHT_ATOL, rtol=0)
        np.testing.assert_allclose(tokens.attn_residual[layer], near_residual / total,
                                   atol=WEIGHT_ATOL, rtol=0)
        # the MLP sublayer: resid_post = resid_mid + mlp_out
        mlp_out = post - mid
        near_mlp, near_mid = _proximity(mlp_out, post), _proximity(mid, post)
        np.testing.assert_allclose(f.mlp[layer], near_mlp / (near_mlp + near_mid),
                                   atol=WEIGHT_ATOL, rtol=0)
        np.testing.assert_allclose(f.mlp_residual[layer], near_mid / (near_mlp + near_mid),
                                   atol=WEIGHT_ATOL, rtol=0)
    # the importances are not all on the residual: some head carries weight
    assert f.head_weights.max() > 0.1


# ---- the importances ------------------------------------------------------------------------

@pytest.fixture(scope="module")
def flow(decoder):
    return decoder.information_flow(PROMPT, threshold=0.04)


@pytest.fixture(scope="module")
def token_flow(decoder):
    return decoder.information_flow(PROMPT, heads=False)


def test_every_nodes_incoming_weights_sum_to_one_and_none_reach_a_later_token(
        decoder, flow, token_flow):
    n, layers = len(flow.ids), decoder.num_layers
    assert flow.head_weights.shape == (layers, decoder.num_heads, n, n)
    assert flow.head_weights.dtype == np.float32 and flow.token_weights is None
    assert token_flow.token_weights.shape == (layers, n, n) and token_flow.head_weights is None
    upper = np.triu_indices(n, 1)
    assert np.all(flow.head_weights[..., upper[0], upper[1]] == 0)
    assert np.all(token_flow.token_weights[:, upper[0], upper[1]] == 0)
    for f, parts in ((flow, flow.head_weights.sum(axis=(1, 3))),
                     (token_flow, token_flow.token_weights.sum(axis=2))):
        np.testing.assert_allclose(parts + f.attn_residual, 1, atol=1e-5)
        np.testing.assert_allclose(f.mlp + f.mlp_residual, 1, atol=1e-5)
        for a in (f.attn_residual, f.mlp, f.mlp_residual):
            assert a.shape == (layers, n) and a.min() >= 0 and a.max() <= 1
    # the first token reads only itself
    np.testing.assert_allclose(flow.head_weights[:, :, 0, 0].sum(axis=1)
                               + flow.attn_residual[:, 0], 1, atol=1e-5)
    with pytest.raises(ValueError):
        flow.head_weights[0, 0, 0, 0] = 1                                # read-only


# ---- the graph --------------------------------------------------------------------------------

def _all_edges(f):
    """Every edge of the importances, as (layer, source, target, kind, head, weight)."""
    layers, n = f.attn_residual.shape
    edges = []
    for layer in range(layers):
        for i in range(n):
            edges.append((layer, i, i, "attn_residual", -1, f.attn_residual[layer, i]))
            edges.append((layer, i, i, "mlp", -1, f.mlp[layer, i]))
            edges.append((layer, i, i, "mlp_residual", -1, f.mlp_residual[layer, i]))
            for j in range(i + 1):
                if f.heads:
                    edges += [(layer, j, i, "head", h, f.head_weights[layer, h, i, j])
                              for h in range(f.head_weights.shape[1])]
                else:
                    edges.append((layer, j, i, "attn", -1, f.token_weights[layer, i, j]))
    return edges


def _rows(edge):
    row = 2 * edge[0] + (1 if edge[3].startswith("mlp") else 0)
    return (row, edge[1]), (row + 1, edge[2])


def _walk(f, position, threshold):
    """The graph by its definition: top-down, an edge ≥ threshold into a kept node is kept
    and keeps its source."""
    layers = f.attn_residual.shape[0]
    kept = {(2 * layers, position)}
    edges = set()
    by_target_row = {}
    for e in _all_edges(f):
        by_target_row.setdefault(_rows(e)[1][0], []).append(e)
    for row in range(2 * layers, 0, -1):
        for e in by_target_row.get(row, []):
            source, target = _rows(e)
            if target in kept and e[5] >= threshold:
                edges.add(e[:5])
                kept.add(source)
    return kept, edges


@pytest.mark.parametrize("threshold", [0.0, 0.02, 0.04, 0.3])
def test_the_graph_is_every_edge_above_the_threshold_into_a_kept_node(flow, threshold):
    position = 5
    g = flow.graph(position=position, threshold=threshold)
    kept, edges = _walk(flow, position, threshold)
    assert set(g.nodes) == kept and len(g.nodes) == len(kept)
    assert {e[:5] for e in g.edges} == edges and len(g.edges) == len(edges)
    layers = flow.num_layers
    assert g.top == (2 * layers, position) and g.nodes[0] == g.top
    for e in g.edges:
        assert e[5] >= threshold and isinstance(e[5], float)
        source, target = _rows(e)
        assert source in kept and target in kept
        assert (e[4] >= 0) == (e[3] == "head") and e[3] in KINDS
    # sorted by layer descending, then weight descending
    keys = [(-e[0], -e[5]) for e in g.edges]
    assert keys == sorted(keys)


def test_with_threshold_zero_the_whole_causal_cone_is_reached(decoder, flow):
    layers, position = decoder.num_layers, 6
    g = flow.graph(position=position, threshold=0)
    # the MLP rows reach only their own position; the attention every earlier one
    cone = {(2 * layers, position), (2 * layers - 1, position)} | \
        {(row, j) for row in range(2 * layers - 1) for j in range(position + 1)}
    assert set(g.nodes) == cone


def test_a_raised_threshold_keeps_a_subset(flow):
    low, high = flow.graph(threshold=0.01), flow.graph(threshold=0.1)
    assert set(high.nodes) < set(low.nodes)
    assert {e[:5] for e in high.edges} < {e[:5] for e in low.edges}
    assert flow.graph(threshold=1.0).nodes[0] == flow.top


def test_the_position_counts_from_the_end_and_graph_walks_again_without_a_run(decoder, flow):
    n = len(flow.ids)
    assert flow.position == n - 1 and flow.threshold == 0.04
    assert flow.top == (2 * decoder.num_layers, n - 1)
    first = decoder.information_flow(PROMPT, position=-n)
    assert first.position == 0 and first.graph(position=-1).edges == flow.edges
    again = flow.graph(position=3, threshold=0.1)
    fresh = decoder.information_flow(PROMPT, position=3, threshold=0.1)
    assert again.edges == fresh.edges and again.nodes == fresh.nodes
    assert again.head_weights is flow.head_weights                     # shared, not recomputed
    assert flow.graph().edges == flow.edges


def test_token_level_edges_are_attn_with_no_head(token_flow):
    kinds = {e[3] for e in token_flow.edges}
    assert "attn" in kinds and "head" not in kinds
    assert all(e[4] == -1 for e in token_flow.edges)
    kept, edges = _walk(token_flow, token_flow.position, token_flow.threshold)
    assert {e[:5] for e in token_flow.edges} == edges


def test_errors_and_limits(decoder):
    for bad in (1.5, -0.1, float("nan"), "0.1", True, None):
        with raises_message("error.flow.threshold", value=repr(bad)):
            decoder.information_flow(PROMPT, threshold=bad)
    n = len(decoder.encode(PROMPT))
    for bad in (n, -n - 1, 1.5):
        with raises_message("error.whole_number", name="position"):
            decoder.information_flow(PROMPT, position=bad)
    with raises_message("error.flow.heads", value="'yes'"):
        decoder.information_flow(PROMPT, heads="yes")
    f = decoder.information_flow(PROMPT)
    with raises_message("error.flow.threshold"):
        f.graph(threshold=2)
    with raises_message("error.whole_number", name="position"):
        f.graph(position=n)
    with raises_message("error.layer.ids"):
        decoder.information_flow(np.array([-1, 3]))
    short = decoder.information_flow(PROMPT, max_tokens=4)
    assert len(short.ids) == 4 and short.head_weights.shape[-1] == 4
    assert short.tokens == decoder.tokenize(PROMPT)[:4]


@pytest.mark.slow
def test_a_text_longer_than_the_model_reads_is_cut_as_the_lens_cuts_it(decoder):
    # the token-level view: the per-head one of 512 tokens takes about a minute here
    ids = np.resize(decoder.encode(PROMPT), decoder.max_tokens + 3)
    f = decoder.information_flow(ids, heads=False, threshold=0.2)
    assert len(f.ids) == decoder.max_tokens == 512
    np.testing.assert_array_equal(f.ids, ids[:512])
    np.testing.assert_allclose(f.token_weights.sum(axis=2) + f.attn_residual, 1, atol=1e-5)


def test_exports_round_trip_and_say_what_every_field_is(tmp_path, decoder, flow):
    data = json.loads(flow.to_json())
    assert data["tokens"] == flow.tokens and data["position"] == flow.position
    assert data["threshold"] == flow.threshold and data["heads"] is True
    assert data["num_layers"] == flow.num_layers
    assert data["model"] == decoder.path.name and data["model"].endswith(".gguf")
    assert data["total_edges"] == len(flow.edges) and data["left_out"] == 0
    assert [(node["row"], node["position"]) for node in data["nodes"]] == list(flow.nodes)
    assert [tuple(e[k] for k in ("layer", "source", "target", "kind", "head", "weight"))
            for e in data["edges"]] == flow.edges
    # every field and every column is described
    described = set(data["fields"])
    assert set(data) - {"fields"} <= described
    assert {f"nodes[].{k}" for k in data["nodes"][0]} <= described
    assert {f"edges[].{k}" for k in data["edges"][0]} <= described
    path = tmp_path / "flow.npz"
    np.savez(path, **flow.arrays())
    with np.load(path, allow_pickle=False) as saved:
        about = json.loads(str(saved["about"]))
        assert set(about) == set(saved.files)            # every array said, none invented
        np.testing.assert_array_equal(saved["head_weights"], flow.head_weights)
        np.testing.assert_array_equal(saved["mlp"], flow.mlp)
        assert list(saved["tokens"]) == flow.tokens and str(saved["model"]) == data["model"]
        assert int(saved["position"]) == flow.position
        assert float(saved["threshold"]) == flow.threshold and bool(saved["heads"])
        assert int(saved["total_edges"]) == len(flow.edges) and int(saved["max_edges"]) == -1
        kinds = list(saved["kinds"])
        rebuilt = [(int(a), int(b), int(c), kinds[k], int(h), float(w)) for a, b, c, k, h, w
                   in zip(*(saved[f"edge_{name}"] for name in
                            ("layer", "source", "target", "kind", "head", "weight")))]
        assert [e[:5] for e in rebuilt] == [e[:5] for e in flow.edges]
        np.testing.assert_allclose([e[5] for e in rebuilt], [e[5] for e in flow.edges])
        assert list(zip(saved["node_row"].tolist(), saved["node_position"].tolist())) == \
            list(flow.nodes)


# ---- a bounded graph: the most important edges -------------------------------------------------

def _synthetic(layers=3, heads=2, n=5, seed=0, step=None):
    """An InformationFlow of random importances (not normalised: the walk does not need it);
    with `step`, every weight a multiple of it, so that many tie."""
    from attnviz.models.readers.flow import InformationFlow

    rng = np.random.default_rng(seed)

    def weights(*shape):
        w = rng.random(shape).astype(np.float32)
        return w if step is None else (np.round(w / step) * step).astype(np.float32)

    head_weights = weights(layers, heads, n, n) * np.tri(n, dtype=np.float32)
    return InformationFlow(
        ids=np.arange(n), tokens=[f"t{i}" for i in range(n)], heads=True, position=n - 1,
        threshold=0.0, head_weights=head_weights, token_weights=None,
        attn_residual=weights(layers, n), mlp=weights(layers, n),
        mlp_residual=weights(layers, n), nodes=(), edges=[])


def _check_bounded(f, position, threshold, most):
    g = f.graph(position=position, threshold=threshold, max_edges=most)
    _, everything = _walk(f, position, threshold)              # the definition, unbounded
    weight = {e[:5]: float(e[5]) for e in _all_edges(f)}
    kept = {e[:5] for e in g.edges}
    assert g.total_edges == len(everything)
    assert len(g.edges) == len(kept) == min(most, len(everything))
    assert g.left_out == len(everything) - len(kept)
    assert kept <= everything
    if g.left_out:          # the kept ones are exactly the most important
        assert min(weight[e] for e in kept) >= max(weight[e] for e in everything - kept)
    assert all(e[5] == weight[e[:5]] for e in g.edges)
    ends = {end for e in g.edges for end in _rows(e)} | {g.top}
    assert set(g.nodes) == ends and len(g.nodes) == len(ends)
    keys = [(-e[0], -e[5]) for e in g.edges]
    assert keys == sorted(keys)
    return g


@pytest.mark.parametrize("step", [None, 0.25])
@pytest.mark.parametrize("most", [1, 7, 40, 10_000])
def test_a_bound_keeps_the_most_important_edges_of_the_graph(step, most):
    f = _synthetic(step=step)
    for position, threshold in ((4, 0.0), (2, 0.3), (4, 0.6)):
        g = _check_bounded(f, position, threshold, most)
        assert g.max_edges == most
    unbounded = f.graph(max_edges=None)
    assert unbounded.left_out == 0 and unbounded.max_edges is None


def test_a_bound_on_the_real_flow_at_threshold_zero(flow, token_flow):
    for f in (flow, token_flow):
        g = _check_bounded(f, 6, 0.0, 300)
        assert g.left_out > 0
        assert g.graph(position=6).edges == g.edges               # the bound is kept
    with raises_message("error.whole_number", name="max_edges"):
        flow.graph(max_edges=0)


# ---- the figure ---------------------------------------------------------------------------------

RAW = "\"<>&'"
FIGURE_TOKENS = ["a", RAW, "c"]
FIGURE_EDGES = [(1, 2, 2, "attn_residual", -1, 0.9), (1, 2, 2, "mlp", -1, 0.3),
                (1, 2, 2, "mlp_residual", -1, 0.7), (1, 1, 2, "head", 4, 0.05),
                (0, 0, 1, "head", 0, 0.6), (0, 1, 1, "head", 8, 0.2),
                (0, 1, 1, "attn_residual", -1, 0.1)]


def _edge_traces(fig):
    return [tr for tr in fig.data if tr.meta in KINDS]


def test_the_figure_has_one_trace_per_kind_and_each_edge_is_as_wide_as_its_weight():
    fig = flow_graph(FIGURE_EDGES, FIGURE_TOKENS, 2, title="t", position=2)
    assert sorted(tr.meta for tr in _edge_traces(fig)) == \
        sorted({"head", "attn_residual", "mlp", "mlp_residual"})
    assert len(fig.layout.shapes) == len(FIGURE_EDGES)
    widths = [s.line.width for s in fig.layout.shapes]
    weights = [e[5] for e in FIGURE_EDGES]
    order = np.argsort(weights)
    assert np.all(np.diff(np.array(widths)[order]) > 0)
    assert min(widths) >= MIN_WIDTH and max(widths) <= MAX_WIDTH
    # customdata (layer, head, source, target, kind) round-trips to the edges
    back = {(int(c[0]), int(c[2]), int(c[3]), c[4], int(c[1]))
            for tr in _edge_traces(fig) for c in tr.customdata}
    assert back == {e[:5] for e in FIGURE_EDGES}
    nodes = next(tr for tr in fig.data if tr.meta == "nodes")
    assert (4, 2) in {(int(r), int(p)) for r, p in nodes.customdata}    # the top node


def test_the_figure_shows_a_token_as_written_once_escaped():
    fig = flow_graph(FIGURE_EDGES, FIGURE_TOKENS, 2, title="t")
    hovers = [h for tr in _edge_traces(fig) for h in tr.hovertext]
    escaped = "\"&lt;&gt;&amp;'"
    assert any(escaped in h for h in hovers)
    assert not any("&amp;lt;" in h or "<>&" in h for h in hovers)
    assert escaped in fig.layout.xaxis.ticktext


def test_the_figure_draws_the_heaviest_edges_when_there_are_too_many():
    fig = flow_graph(FIGURE_EDGES, FIGURE_TOKENS, 2, title="t", max_edges=3)
    drawn = {(int(c[0]), int(c[2]), int(c[3]), c[4], int(c[1]))
             for tr in _edge_traces(fig) for c in tr.customdata}
    assert drawn == {e[:5] for e in sorted(FIGURE_EDGES, key=lambda e: -e[5])[:3]}
    assert "figure.flow" not in fig.layout.title.text and "<sub>" in fig.layout.title.text
    # edges already the heaviest of a bounded graph: the title says of how many
    whole = flow_graph(FIGURE_EDGES[:3], FIGURE_TOKENS, 2, title="t", total=20)
    assert message_pattern("figure.flow.edges_cut", shown=3, total=20).search(
        whole.layout.title.text)
    assert "<sub>" not in flow_graph(FIGURE_EDGES[:3], FIGURE_TOKENS, 2, title="t",
                                     total=3).layout.title.text


def test_the_figure_of_a_real_flow(decoder, flow):
    fig = flow_graph(flow.edges, flow.tokens, decoder.num_layers, title="t",
                     position=flow.position)
    drawn = sum(len(tr.customdata) for tr in _edge_traces(fig))
    assert drawn == len(flow.edges) == len(fig.layout.shapes)
    nodes = next(tr for tr in fig.data if tr.meta == "nodes")
    assert {(int(r), int(p)) for r, p in nodes.customdata} == set(flow.nodes)
