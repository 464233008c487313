"""The head atlas (attnviz.models.readers.atlas, atlas_map, atlas_runners; io.atlas_files): per-head
metrics against a plain loop over transformers' attentions, the top examples against a
brute-force pass, the q/k sample against transformers' projections, merge in any split and
order, the joint map's softmax-preserving changes and PCA against numpy's SVD, the process
pool and a local Ray cluster against one process, the file and the CLI.

The expected numbers are transformers' (eager attentions of the same GGUF, fed attnviz's token
ids) reduced by a plain loop here, row by row; never attnviz's."""

import itertools
import math
import os
import random
import unicodedata

import numpy as np
import pytest

from attnviz.models.readers import atlas, atlas_map
from attnviz.models.readers.atlas import Settings
from tests import tiny_decoders

TEXTS = ["the is the is 自注意力 机制. the, is!",
         "is the 机制 the is is, the the.",
         "自注意力 机制 自注意力 机制 the is",
         "is",                                           # one token (llama): skipped
         "is is is is. the the the the! 机制 机制",
         "the is, the is. the is; 自注意力",
         "机制 is the 自注意力 is the 机制 is the",
         "the. the. is. is. 机制. 机制."]
SETTINGS = Settings(top_k=5, reservoir=2, sample_size=40, sample_rate=0.5, sample_texts=0.75,
                    seed=3)


@pytest.fixture(scope="module")
def tiny_paths(tmp_path_factory):
    folder = tmp_path_factory.mktemp("atlas-tiny")
    return {arch: tiny_decoders.write(folder / f"tiny-{arch}-F32.gguf", arch, "F32").path
            for arch in ("llama", "gemma3")}


@pytest.fixture(scope="module")
def tiny(tiny_paths):
    from attnviz.models.decoders.decoder import DecoderModel

    return {arch: DecoderModel.load(path) for arch, path in tiny_paths.items()}


@pytest.fixture(scope="module")
def whole(tiny):
    """The llama tiny model's atlas of TEXTS in one reduce."""
    return atlas.reduce(tiny["llama"], TEXTS, SETTINGS)


# ---- the reference: transformers' attentions, a plain loop ---------------------------------------

def hf_attentions(model, ids) -> np.ndarray:
    """(L, H, n, n) float64: transformers' eager attentions on the token ids."""
    import torch

    with torch.no_grad():
        out = model(input_ids=torch.tensor([list(ids)]), output_attentions=True)
    return np.stack([a[0].double().numpy() for a in out.attentions])


def plain_rows(a: np.ndarray, ids, punct) -> dict[str, np.ndarray]:
    """Each metric of each row (L, H, n), by a loop over rows, TransformerLens's detector
    definitions written out: previous token a[i, i−1]; duplicate Σ a[i, j] over earlier j with
    ids[j] = ids[i]; induction Σ a[i, j] over 1 ≤ j ≤ i with ids[j − 1] = ids[i], j − 1 < i."""
    layers, heads, n, _ = a.shape
    names = ["entropy", "sparsity", "sink", "distance", "punctuation", "max_weight",
             "previous_token", "duplicate_token", "induction"]
    out = {k: np.zeros((layers, heads, n)) for k in names}
    for l, h, i in itertools.product(range(layers), range(heads), range(n)):
        row = a[l, h, i, :i + 1]
        out["entropy"][l, h, i] = -sum(p * math.log2(p) for p in row if p > 0)
        ranked = sorted(row, reverse=True)
        total, kept = 0.0, 0
        for p in ranked:
            total += p
            kept += 1
            if total >= 0.9 * sum(row):
                break
        out["sparsity"][l, h, i] = kept
        out["sink"][l, h, i] = row[0]
        out["distance"][l, h, i] = sum(row[j] * (i - j) for j in range(i + 1))
        out["punctuation"][l, h, i] = sum(row[j] for j in range(i + 1) if punct[j])
        out["max_weight"][l, h, i] = max(row)
        out["previous_token"][l, h, i] = row[i - 1] if i else 0.0
        out["duplicate_token"][l, h, i] = sum(row[j] for j in range(i) if ids[j] == ids[i])
        out["induction"][l, h, i] = sum(row[j] for j in range(1, i + 1)
                                        if ids[j - 1] == ids[i])
    return out


def plain_pattern(a: np.ndarray) -> np.ndarray:
    """(L, H, 17): Σ over rows of the weight at offset d = 0 … 15 behind the query, then on
    the first token when it is 16 or more behind."""
    layers, heads, n, _ = a.shape
    out = np.zeros((layers, heads, 17))
    for l, h, i in itertools.product(range(layers), range(heads), range(n)):
        for d in range(min(16, i + 1)):
            out[l, h, d] += a[l, h, i, i - d]
        if i >= 16:
            out[l, h, 16] += a[l, h, i, 0]
    return out


def punctuation_of(tokenizer, ids) -> list[bool]:
    text = [tokenizer.decode([int(i)]).strip() for i in ids]
    return [bool(t) and all(unicodedata.category(c).startswith("P") for c in t) for t in text]


def plain_means(hf_model, tokenizer, decoder, texts):
    """Each metric's mean over every row of every text of ≥ 2 tokens, and the rows (text,
    position, layer, head, max weight) for the top examples."""
    sums, count, rows = {}, 0, []
    for t in texts:
        ids = decoder.encode(t)[:decoder.max_tokens]
        if len(ids) < 2:
            continue
        a = hf_attentions(hf_model, ids)
        per_row = plain_rows(a, ids, punctuation_of(tokenizer, ids))
        for k, v in per_row.items():
            sums[k] = sums.get(k, 0) + v.sum(axis=-1)
        sums["pattern"] = sums.get("pattern", 0) + plain_pattern(a)
        count += len(ids)
        rows.append((atlas.text_id(t), per_row["max_weight"]))
    return {k: v / count for k, v in sums.items()}, rows


@pytest.fixture(scope="module")
def hf_tiny(tiny_paths, torch):
    return {arch: tiny_decoders.load(path) for arch, path in tiny_paths.items()}


# ---- the metrics -------------------------------------------------------------------------------

@pytest.mark.reference
@pytest.mark.parametrize("arch", ["llama", "gemma3"])
def test_metrics_equal_a_plain_loop_over_transformers_attentions(arch, tiny, hf_tiny):
    decoder = tiny[arch]
    partial = atlas.reduce(decoder, TEXTS, SETTINGS)
    expected, _ = plain_means(*hf_tiny[arch], decoder, TEXTS)
    got = partial.means() | {"pattern": partial.mean_pattern()}
    for name, values in expected.items():
        np.testing.assert_allclose(got[name], values, rtol=1e-5, atol=1e-5, err_msg=name)
    short = sum(len(decoder.encode(t)) < 2 for t in TEXTS)
    assert partial.skipped == short and partial.texts == len(TEXTS) - short
    assert short == (arch == "llama")


@pytest.mark.reference
def test_top_examples_are_the_brute_force_arg_max(whole, tiny, hf_tiny):
    _, rows = plain_means(*hf_tiny["llama"], tiny["llama"], TEXTS)
    k = SETTINGS.top_k
    for layer, head in itertools.product(range(2), range(4)):
        # every row of a query that sees min_keys keys or more (i + 1 ≥ min_keys), of every
        # text: (score, text, position)
        scores = {(int(tid), i): float(m[layer, head, i]) for tid, m in rows
                  for i in range(m.shape[-1]) if i + 1 >= SETTINGS.min_keys}
        best = sorted(scores.values(), reverse=True)[:k]
        got = list(zip(whole.top_text[layer, head].tolist(), whole.top_pos[layer, head].tolist()))
        np.testing.assert_allclose(whole.top_score[layer, head], best, atol=1e-5)
        for text, pos in got:                  # the rows named hold those scores in the reference
            assert scores[(text, pos)] >= best[-1] - 1e-5
        assert len(set(got)) == k


@pytest.mark.reference
def test_related_heads_are_the_nearest_mean_patterns(whole, tiny, hf_tiny):
    """Against cosine similarity of transformers' mean patterns, brute force; the closest pair
    of heads shares a cluster (average linkage joins it first)."""
    expected, _ = plain_means(*hf_tiny["llama"], tiny["llama"], TEXTS)
    x = expected["pattern"].reshape(8, -1)
    x = x / np.linalg.norm(x, axis=1, keepdims=True)
    sim = x @ x.T
    nearest, similarity = atlas_map.related_heads(whole, k=3)
    for head in range(8):
        others = sorted((j for j in range(8) if j != head), key=lambda j: -sim[head, j])
        assert list(nearest[head]) == others[:3]
        np.testing.assert_allclose(similarity[head], sim[head, others[:3]], atol=1e-5)
    np.fill_diagonal(sim, -1)
    a, b = np.unravel_index(sim.argmax(), sim.shape)
    clusters = atlas_map.head_clusters(whole, clusters=3).ravel()
    assert clusters[a] == clusters[b] and len(set(clusters)) == 3


def test_the_fast_rows_equal_todays_head_statistics(tiny):
    """row_metrics and detection_sums (the atlas's fast path) average to causal_head_stats'
    entropy and sink and detection_scores' scores on a run's attentions."""
    from attnviz.core import reading

    run = tiny["llama"].run(TEXTS[0])
    n = len(run.ids)
    stats = reading.causal_head_stats(run.attentions)
    rows = np.stack([reading.row_metrics(w, np.zeros(n, bool)) for w in run.attentions])
    cells = reading.detection_cells(run.ids)
    sums = np.stack([reading.detection_sums(w, cells) for w in run.attentions])
    np.testing.assert_allclose(rows[:, 0].mean(-1).ravel(), stats["entropy"], rtol=1e-6)
    np.testing.assert_allclose(rows[:, 2].mean(-1).ravel(), stats["sink"], rtol=1e-6)
    np.testing.assert_allclose(rows[:, 5].mean(-1).ravel(), stats["max_weight"], rtol=1e-6)
    for d, name in enumerate(reading.DETECTORS):
        expected = reading.detection_scores(run.attentions,
                                            reading.detection_pattern(run.ids, name))
        np.testing.assert_allclose(sums[:, d] / n, expected, rtol=1e-6, atol=1e-12)


@pytest.mark.reference
def test_sampled_queries_and_keys_are_transformers(whole, tiny, hf_tiny):
    """Before RoPE, transformers' q_proj and k_proj outputs at the sampled positions; after
    RoPE, their products give transformers' weights: log a_pj − log a_pj' = scale q_p·(k_j − k_j')."""
    import torch

    hf, _ = hf_tiny["llama"]
    decoder = tiny["llama"]
    d_k, heads, kv_heads = 64, 4, 2
    assert len(whole.sample_pos) == SETTINGS.sample_size
    q_rot, k_rot = whole.rotated("q"), whole.rotated("k")
    by_text = {int(atlas.text_id(t)): t for t in TEXTS}
    for tid in sorted(set(whole.sample_text.tolist()))[:3]:
        ids = decoder.encode(by_text[tid])
        seen = {}
        hooks = [m.self_attn.q_proj.register_forward_hook(
                     lambda mod, i, o, l=l: seen.__setitem__(("q", l), o[0].numpy()))
                 for l, m in enumerate(hf.model.layers)]
        hooks += [m.self_attn.k_proj.register_forward_hook(
                      lambda mod, i, o, l=l: seen.__setitem__(("k", l), o[0].numpy()))
                  for l, m in enumerate(hf.model.layers)]
        with torch.no_grad():
            out = hf(input_ids=torch.tensor([list(ids)]), output_attentions=True)
        for h in hooks:
            h.remove()
        mine = np.flatnonzero(whole.sample_text == tid)
        pos = whole.sample_pos[mine]
        for layer in range(2):
            q = seen[("q", layer)].reshape(len(ids), heads, d_k)[pos]
            k = seen[("k", layer)].reshape(len(ids), kv_heads, d_k)[pos]
            np.testing.assert_allclose(whole.sample_q[mine, layer], q, atol=1e-4)
            np.testing.assert_allclose(whole.sample_k[mine, layer], k, atol=1e-4)
            weights = out.attentions[layer][0].double().numpy()          # (H, n, n)
            p, j0, j1 = pos.max(), pos.min(), sorted(pos)[1] if len(pos) > 1 else pos.min()
            ip, i0, i1 = (mine[np.flatnonzero(pos == x)[0]] for x in (p, j0, j1))
            for head in range(heads):
                expected = math.log(weights[head, p, j0]) - math.log(weights[head, p, j1])
                got = d_k ** -0.5 * q_rot[ip, layer, head] @ (
                    k_rot[i0, layer, head // 2] - k_rot[i1, layer, head // 2])
                assert got == pytest.approx(expected, abs=1e-4)


@pytest.mark.reference
@pytest.mark.parametrize("arch", ["llama", "gemma3"])
def test_unrotated_qk_of_some_rows_are_transformers_q_and_k_before_rope(arch, tiny, hf_tiny):
    """DecoderModel.unrotated_qk of a few residual rows alone: transformers' q and k at those
    positions before RoPE — q_proj / k_proj, then q_norm / k_norm where the model has QK-norm
    (gemma3)."""
    import torch

    hf, _ = hf_tiny[arch]
    decoder = tiny[arch]
    ids = decoder.encode(TEXTS[0])
    rows = np.array([1, 4, len(ids) - 1])
    heads, kv_heads, d_k = decoder.num_heads, decoder.num_kv_heads, decoder.d_k
    seen = {}
    hooks = []
    for l, m in enumerate(hf.model.layers):
        a = m.self_attn
        q_mod, k_mod = (a.q_norm, a.k_norm) if arch == "gemma3" else (a.q_proj, a.k_proj)
        hooks += [q_mod.register_forward_hook(
                      lambda mod, i, o, l=l: seen.__setitem__(("q", l), o[0].numpy())),
                  k_mod.register_forward_hook(
                      lambda mod, i, o, l=l: seen.__setitem__(("k", l), o[0].numpy()))]
    with torch.no_grad():
        hf(input_ids=torch.tensor([list(ids)]))
    for h in hooks:
        h.remove()
    run = decoder.run(TEXTS[0])
    for layer in range(decoder.num_layers):
        q, k = decoder.unrotated_qk(layer, run.hidden_states[layer][rows])
        assert q.shape == (heads, len(rows), d_k) and k.shape == (kv_heads, len(rows), d_k)
        want_q, want_k = seen[("q", layer)], seen[("k", layer)]
        if arch == "gemma3":                               # q_norm's output: (H, n, d_k)
            want_q, want_k = want_q[:, rows], want_k[:, rows]
        else:                                              # q_proj's: (n, H · d_k)
            want_q = want_q.reshape(len(ids), heads, d_k)[rows].swapaxes(0, 1)
            want_k = want_k.reshape(len(ids), kv_heads, d_k)[rows].swapaxes(0, 1)
        np.testing.assert_allclose(q, want_q, atol=1e-4)
        np.testing.assert_allclose(k, want_k, atol=1e-4)


# ---- merge -----------------------------------------------------------------------------------------

def assert_same_atlas(a, b):
    for name in ("counts", "hist", "top_text", "top_pos", "top_score", "res_priority",
                 "res_text", "res_pos", "res_score", "sample_priority", "sample_text",
                 "sample_pos", "sample_token", "sample_q", "sample_k"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
    np.testing.assert_allclose(a.sums, b.sums, rtol=1e-9, atol=0)
    np.testing.assert_allclose(a.offsets, b.offsets, rtol=1e-9, atol=0)
    assert (a.texts, a.tokens, a.skipped) == (b.texts, b.tokens, b.skipped)
    assert a.corpus == b.corpus


def test_any_split_and_any_merge_order_give_the_same_atlas(tiny, whole):
    decoder = tiny["llama"]
    singles = [atlas.reduce(decoder, [t], SETTINGS) for t in TEXTS]
    rng = random.Random(0)
    for _ in range(4):
        order = singles[:]
        rng.shuffle(order)
        while len(order) > 1:                     # merge random neighbours: any grouping
            i = rng.randrange(len(order) - 1)
            order[i:i + 2] = [atlas.merge(order[i], order[i + 1])]
        assert_same_atlas(order[0], whole)
    split = atlas.merge(atlas.reduce(decoder, TEXTS[5:], SETTINGS),
                        atlas.reduce(decoder, TEXTS[:5], SETTINGS))
    assert_same_atlas(split, whole)


def test_a_stopped_reduce_resumed_and_merged_is_the_whole_atlas(tiny, whole):
    seen = []

    def stop_after_three(done):
        seen.append(done)
        return done < 3

    first = atlas.reduce(tiny["llama"], TEXTS, SETTINGS, progress=stop_after_three)
    assert seen == [1, 2, 3] and first.texts + first.skipped == 3
    assert_same_atlas(atlas.merge(first, atlas.reduce(tiny["llama"], TEXTS[3:], SETTINGS)),
                      whole)


def test_partials_of_other_settings_do_not_merge(tiny, whole):
    from tests.message_helpers import raises_message

    other = atlas.reduce(tiny["llama"], TEXTS[:1], Settings(top_k=2))
    with raises_message("error.atlas.mismatch"):
        atlas.merge(whole, other)


@pytest.mark.parametrize("bins", [32, 30, 7])
def test_the_histograms_bins_are_those_searchsorted_finds(bins):
    """Each metric's values into its edges' bins as np.searchsorted puts them (the last edge
    at or below, the ends included): values on every edge, just either side of each edge,
    below the first and past the last, and at random; the default 32 bins (steps exact in
    binary) and others (steps rounded)."""
    edges = atlas._edges(bins)
    rng = np.random.default_rng(0)
    rows, layers, heads, n = len(atlas.ROW_METRICS), 2, 3, 400
    values = np.empty((rows, layers, heads, n))
    for m, metric in enumerate(atlas.ROW_METRICS):
        e = edges[metric]
        special = np.concatenate([e, np.nextafter(e, -np.inf), np.nextafter(e, np.inf),
                                  [-1e-8, -3.0, e[-1] * 2.5]])
        fill = rng.uniform(-0.1 * e[-1], 1.2 * e[-1], size=layers * heads * n - len(special))
        values[m] = rng.permutation(np.concatenate([special, fill])).reshape(layers, heads, n)
    got = atlas._histograms(values, edges)
    for m, metric in enumerate(atlas.ROW_METRICS):
        where = np.clip(np.searchsorted(edges[metric], values[m], side="right") - 1,
                        0, bins - 1)
        for layer, head in itertools.product(range(layers), range(heads)):
            expected = np.bincount(where[layer, head], minlength=bins)
            np.testing.assert_array_equal(got[m, layer, head], expected, err_msg=metric)


def test_no_example_is_a_query_of_fewer_than_min_keys_keys(tiny, whole):
    """Query i sees i + 1 keys, so its largest weight is ≥ 1 / (i + 1): with only query 0 left
    out (min_keys 2) the first positions crowd the top rows; with min_keys 8 (the default) no
    top row or reservoir row is a query of fewer keys, and the texts (10–18 tokens) are long
    enough that every head's top-k is full."""
    assert Settings().min_keys == 8 and SETTINGS.min_keys == 8
    for part, fewest in ((whole, 8), (atlas.reduce(tiny["llama"], TEXTS, Settings(
            top_k=5, reservoir=2, sample_rate=0.0, min_keys=3)), 3)):
        assert (part.top_pos >= 0).all()
        assert (part.top_pos >= fewest - 1).all()
        assert (part.res_pos[part.res_pos >= 0] >= fewest - 1).all()
    early = atlas.reduce(tiny["llama"], TEXTS, Settings(top_k=5, sample_rate=0.0, min_keys=2))
    assert (early.top_pos[early.top_pos >= 0] < 7).any()     # the bias the bound removes


def test_min_keys_below_two_is_refused_and_old_files_read_as_two(whole, tmp_path):
    """An atlas file written before min_keys (its settings one number short) left out query 0
    only: it reads as min_keys 2, the atlas it was."""
    from attnviz.io.atlas_files import read_atlas
    from tests.message_helpers import raises_message

    with raises_message("error.atlas.min_keys"):
        Settings(min_keys=1)
    arrays = whole.to_arrays()
    arrays["settings"] = arrays["settings"][:-1]                 # the file's older Settings
    np.savez_compressed(tmp_path / "old.npz", **arrays)
    back, _ = read_atlas(tmp_path / "old.npz")
    assert back.settings.min_keys == 2 and back.settings.top_k == SETTINGS.top_k


def test_the_reservoirs_hold_rows_of_their_decile_by_smallest_priority(whole):
    kept = whole.res_pos >= 0
    deciles = np.broadcast_to(np.arange(10)[None, None, :, None], whole.res_pos.shape)
    assert (np.minimum(whole.res_score[kept] * 10, 9).astype(int) == deciles[kept]).all()
    assert (np.diff(whole.res_priority.astype(np.float64), axis=-1) >= 0).all()


# ---- the joint map ---------------------------------------------------------------------------------

def test_the_joint_map_leaves_every_softmax_row_unchanged():
    rng = np.random.default_rng(0)
    q = rng.normal(size=(50, 16)) * 3 + 1
    k = rng.normal(size=(70, 16)) * 0.5 - 2

    def softmax_rows(a, b):
        s = a @ b.T
        e = np.exp(s - s.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)

    q2, k2 = atlas_map.joint(q, k)
    np.testing.assert_allclose(softmax_rows(q2, k2), softmax_rows(q, k), rtol=1e-10, atol=1e-14)
    alpha = q2[0, 0] / q[0, 0]                   # queries × α, keys ÷ α, after the translation
    np.testing.assert_allclose(q2 / alpha, q, rtol=1e-12)
    np.testing.assert_allclose((k2 * alpha).mean(0), q.mean(0), atol=1e-12)   # centroids met
    assert np.linalg.norm(q2, axis=1).mean() == pytest.approx(np.linalg.norm(k2, axis=1).mean())


def test_pca_equals_numpys_svd_on_the_same_matrix(whole):
    points = atlas_map.head_points(whole, 1, 3)
    x = points - points.mean(0)
    u, s, vt = np.linalg.svd(x, full_matrices=False)
    expected = u[:, :2] * s[:2]
    got = atlas_map.pca(points)
    for c in range(2):
        sign = np.sign(got[:, c] @ expected[:, c])
        np.testing.assert_allclose(got[:, c], sign * expected[:, c], atol=1e-9)
    maps = atlas_map.pca_all(whole)
    assert maps.shape == (2, 4, 2 * SETTINGS.sample_size, 2)
    np.testing.assert_allclose(maps[1, 3], got, atol=1e-5)


def test_an_atlas_without_samples_has_empty_maps(tiny):
    part = atlas.reduce(tiny["llama"], TEXTS[:2], Settings(sample_rate=0.0))
    assert len(part.sample_pos) == 0
    assert atlas_map.pca_all(part).shape == (2, 4, 0, 2)


@pytest.mark.slow
def test_tsne_maps_one_head(whole):
    points = atlas_map.head_points(whole, 0, 0)
    out = atlas_map.tsne(points, seed=1)
    assert out.shape == (len(points), 2) and np.isfinite(out).all()


# ---- memory, the file -------------------------------------------------------------------------------

def test_an_atlas_of_smollm2_stays_under_200_mb():
    """The arrays do not grow with the corpus (sums, bins, k + 10 r examples a head, S
    samples); the texts kept are those examples and samples point at: at most 270·(8 + 30) + 384
    texts, each cut to 512 tokens (≤ 4 bytes a character… bounded here by 2 kB a text)."""
    s = Settings()
    p = atlas.Partial.empty("SmolLM2", 30, 9, 3, 64, [1e5] * 30, s)
    p.sample_q = np.zeros((s.sample_size, 30, 9, 64), np.float32)
    p.sample_k = np.zeros((s.sample_size, 30, 3, 64), np.float32)
    texts = 30 * 9 * (s.top_k + 10 * s.reservoir) + s.sample_size
    assert p.nbytes + texts * 2048 < 200e6


def test_the_atlas_file_gives_the_atlas_back(whole, tmp_path):
    from attnviz.io.atlas_files import read_atlas, write_atlas

    maps = atlas_map.pca_all(whole)
    write_atlas(tmp_path / "a.npz", whole, maps)
    back, maps_back = read_atlas(tmp_path / "a.npz")
    assert_same_atlas(back, whole)
    assert back.settings == whole.settings and back.model == whole.model
    np.testing.assert_array_equal(maps_back, maps)


def test_a_corpus_is_read_from_txt_jsonl_and_csv(tmp_path):
    from attnviz.io.atlas_files import read_corpus
    from tests.message_helpers import raises_message

    (tmp_path / "a.txt").write_text("one text\n\nanother\n", encoding="utf-8")
    (tmp_path / "b.jsonl").write_text('{"text": "三"}\n\n{"text": "four"}\n', encoding="utf-8")
    (tmp_path / "c.csv").write_text("id,text\n1,five\n2,\"six, seven\"\n", encoding="utf-8")
    assert read_corpus(tmp_path) == ["one text", "another", "三", "four", "five", "six, seven"]
    with raises_message("error.atlas.corpus_missing", path=str(tmp_path / "none")):
        read_corpus(tmp_path / "none")


def test_the_bundled_corpus_has_english_and_chinese_and_says_its_licence():
    from attnviz.tutorials import atlas_corpus

    en, zh = atlas_corpus.texts("en"), atlas_corpus.texts("zh")
    assert len(en) >= 20 and len(zh) >= 10
    assert all(any("\u4e00" <= c <= "\u9fff" for c in t) for t in zh)
    assert atlas_corpus.texts("all") == en + zh
    readme = (atlas_corpus.HERE / "README.md").read_text(encoding="utf-8")
    assert "licence" in readme.lower() and "written for attnviz" in readme


# ---- the runners --------------------------------------------------------------------------------

@pytest.mark.slow
def test_the_process_pool_and_a_local_ray_cluster_give_one_processs_atlas(tiny_paths, whole):
    """Two spawned workers, then Ray started here with 2 CPUs (2 actors): the same atlas."""
    from attnviz.models.readers import atlas_runners

    path = str(tiny_paths["llama"])
    pooled = atlas_runners.run_pool(path, TEXTS, workers=2, settings=SETTINGS)
    assert_same_atlas(pooled, whole)
    clustered = atlas_runners.run_ray(path, TEXTS, "local", workers=2, settings=SETTINGS)
    assert_same_atlas(clustered, whole)


@pytest.mark.slow
def test_the_cli_writes_an_atlas_file(tiny_paths, tmp_path):
    from attnviz.cli import main
    from attnviz.io.atlas_files import read_atlas

    (tmp_path / "corpus.txt").write_text("\n\n".join(TEXTS), encoding="utf-8")
    out = tmp_path / "atlas.npz"
    assert main(["atlas", "--corpus", str(tmp_path / "corpus.txt"), "--model",
                 str(tiny_paths["llama"]), "--workers", "1", "--out", str(out)]) == 0
    partial, maps = read_atlas(out)
    assert partial.texts == len(TEXTS) - 1 and maps.shape[:2] == (2, 4)
    assert main(["atlas", "--corpus", str(tmp_path / "none"), "--out", str(out)]) == 2


# ---- SmolLM2 ------------------------------------------------------------------------------------

@pytest.mark.slow
def test_smollm2_metrics_equal_transformers(decoder, hf_decoder):
    texts = ["The cat sat on the mat. The cat sat on the rug.", "注意力机制，注意力机制！",
             "One, two, three; one, two, three."]
    partial = atlas.reduce(decoder, texts, Settings(sample_rate=0.0))
    expected, _ = plain_means(*hf_decoder, decoder, texts)
    got = partial.means() | {"pattern": partial.mean_pattern()}
    for name, values in expected.items():
        np.testing.assert_allclose(got[name], values, rtol=1e-5, atol=1e-5, err_msg=name)
    assert partial.sums.shape[1:] == (30, 9) and partial.tokens == sum(
        len(decoder.encode(t)) for t in texts)


# ---- SPEC's names: attnviz.head_atlas and HeadAtlas ---------------------------------------------

@pytest.mark.reference
def test_the_public_head_atlas_is_a_table_of_transformers_means(tiny_paths, tiny, hf_tiny,
                                                                 tmp_path):
    """attnviz.head_atlas on a GGUF path, in this process: SPEC's columns are the plain loop's
    means over transformers' attentions; its examples, maps and related heads answer by
    (layer, head); the file gives the same atlas back; a wrong engine is refused by id."""
    import attnviz
    from attnviz.core.errors import AttnvizInputError

    a = attnviz.head_atlas(TEXTS, model=str(tiny_paths["llama"]), workers=1)
    expected, _ = plain_means(*hf_tiny["llama"], tiny["llama"], TEXTS)
    table = a.metrics
    assert list(table.columns[:9]) == ["layer", "head", "entropy", "sink", "distance",
                                       "sparsity", "prev_token", "duplicate", "induction"]
    assert len(table) == 2 * 4 and table["layer"].tolist() == [0] * 4 + [1] * 4
    # SPEC: entropy in nats (−Σ α ln α); the plain loop's is in bits (log₂)
    np.testing.assert_allclose(table["entropy"], expected["entropy"].ravel() * math.log(2),
                               rtol=1e-5, atol=1e-5)
    for column, name in (("sink", "sink"), ("distance", "distance"),
                         ("sparsity", "sparsity"), ("prev_token", "previous_token"),
                         ("induction", "induction")):
        np.testing.assert_allclose(table[column], expected[name].ravel(), rtol=1e-5,
                                   atol=1e-5, err_msg=column)
    top = a.top_examples(1, 2, k=3)
    assert len(top) == 3 and all(text in TEXTS for text, _, _ in top)
    assert [score for _, _, score in top] == sorted((s for _, _, s in top), reverse=True)
    assert a.embedding(1, 2).shape == (2 * len(a.partial.sample_q), 2)
    assert [(l, h) for l, h, _ in a.related(1, 2, k=3)] != [] and \
        all((l, h) != (1, 2) for l, h, _ in a.related(1, 2, k=3))
    a.save(tmp_path / "atlas.npz")
    again = attnviz.HeadAtlas.load(tmp_path / "atlas.npz")
    assert again.metrics.equals(table) and again.top_examples(1, 2, k=3) == top
    with pytest.raises(AttnvizInputError) as raised:
        attnviz.head_atlas(TEXTS, model=str(tiny_paths["llama"]), engine="spark")
    assert raised.value.msg_id == "error.figure.one_of"
