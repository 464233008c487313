"""The logit lens on SmolLM2 (issue 28.1), held to transformers loading the same GGUF: every
hidden state through transformers' own final norm and lm_head (its last hidden state is already
normed: lm_head alone), the residual after each attention sublayer read by a forward pre-hook
on ``post_attention_layernorm``, and numpy's own RMSNorm. Expected numbers never come from
attnviz."""

from types import SimpleNamespace

import numpy as np
import pytest

from attnviz.models.readers.lens import ATTENTION, LAYER
from tests.message_helpers import raises_message

PROMPT = "The Eiffel Tower is in the city of"
OTHER = "def add(a, b):\n    return a + b  # 早上好"
LOGIT_ATOL = 1e-3           # the bound at every layer and position (seen here: ≤ 2.1e-4
                            # on three prompts), as the decoder's logits in test_decoder.py


def _hf_lens(torch, hf_decoder, ids, sublayers=False):
    """Transformers' logits at every layer boundary (L + 1, n, vocab), and with `sublayers`
    after each attention sublayer (L, n, vocab), with the hidden states and the residuals."""
    model, _ = hf_decoder
    mids = {}
    handles = [layer.post_attention_layernorm.register_forward_pre_hook(
        lambda module, args, i=i: mids.__setitem__(i, args[0].detach().clone()))
        for i, layer in enumerate(model.model.layers)] if sublayers else []
    try:
        with torch.no_grad():
            out = model(torch.tensor([list(ids)]), output_hidden_states=True)
            hidden = out.hidden_states
            last = len(hidden) - 1
            logits = [model.lm_head(model.model.norm(h) if i < last else h)[0]
                      for i, h in enumerate(hidden)]                    # the last is normed
            mid_logits = [model.lm_head(model.model.norm(mids[i]))[0]
                          for i in range(last)] if sublayers else []
    finally:
        for handle in handles:
            handle.remove()
    return (torch.stack(logits).numpy(), out.logits[0].numpy(),
            [h[0].numpy() for h in hidden], mid_logits and torch.stack(mid_logits).numpy(),
            [mids[i][0].numpy() for i in range(last)] if sublayers else [])


# The same rows projected in another product (a lens of other rows or positions) agree up to
# float32 rounding, not to the bit: a BLAS kernel may sum a row's 576 products in another order
# in another batch (OpenBLAS's Haswell kernel against its SkylakeX one: ≤ 4 ulps of a logit,
# ≤ 8e-6 of a probability). A logit of ~160 has ulps of 1.5e-5; the bounds allow 8 ulps.
ROUNDING_RTOL = 1e-4        # a probability, a KL
ROUNDING_ULPS = 8           # a logit


def _same_up_to_rounding(part, whole, columns, name):
    """One lens's arrays against another's columns: equal where the order is decided by more
    than the rounding (a top token may swap with one of the same probability), close elsewhere."""
    if name == "top_ids":             # a swap only between tokens of equal probabilities
        swapped = getattr(part, name) != whole.top_ids[..., columns, :]
        np.testing.assert_allclose(part.top_probs[swapped],
                                   whole.top_probs[..., columns, :][swapped],
                                   rtol=ROUNDING_RTOL, err_msg=name)
    elif name == "target_rank":       # a rank moves only past tokens within rounding of it
        for r in range(len(whole.rows)):
            logits = whole.logits(r)[columns]                             # (n, vocab)
            chosen = logits[np.arange(len(columns)), whole.target[columns]]
            ulps = ROUNDING_ULPS * np.spacing(np.abs(logits).max(axis=-1))
            near = (np.abs(logits - chosen[:, None]) <= ulps[:, None]).sum(-1) - 1
            moved = np.abs(part.target_rank[r] - whole.target_rank[r, columns])
            assert (moved <= near).all(), (name, r)
    else:
        expected = getattr(whole, name)
        expected = expected[..., columns, :] if expected.ndim == 3 else expected[..., columns]
        atol = 0
        if name == "kl":                  # each logit within ε: each log-softmax within 2ε, and
            peak = max(np.abs(whole.logits(r)[columns]).max() for r in range(len(whole.rows)))
            atol = 4 * ROUNDING_ULPS * np.spacing(np.float32(peak))   # KL = Σ p (log p − log q)
        np.testing.assert_allclose(getattr(part, name), expected, rtol=ROUNDING_RTOL,
                                   atol=atol, err_msg=name)


def _softmax(logits):
    x = np.asarray(logits, dtype=np.float64)
    x = x - x.max(axis=-1, keepdims=True)
    e = np.exp(x)
    return e / e.sum(axis=-1, keepdims=True)


def _rms_norm(h, gain, eps):
    h = np.asarray(h, dtype=np.float64)
    return h / np.sqrt((h * h).mean(axis=-1, keepdims=True) + eps) * gain


# ---- the last row is the model's own output ------------------------------------------------------

def test_last_row_is_the_models_own_next_token_distribution(decoder):
    lens = decoder.logit_lens(PROMPT, k=10)
    run = decoder.run(PROMPT)
    assert lens.rows[-1] == (LAYER, decoder.num_layers) and lens.rows[0] == (LAYER, 0)
    assert len(lens.rows) == decoder.num_layers + 1
    np.testing.assert_array_equal(lens.logits(-1), run.logits)       # the same computation
    probs = _softmax(run.logits)                                      # (n, vocab)
    expected = np.argsort(-probs, axis=-1, kind="stable")[:, :10]
    np.testing.assert_array_equal(lens.top_ids[-1], expected)
    np.testing.assert_allclose(lens.top_probs[-1],
                               np.take_along_axis(probs, expected, axis=-1), atol=1e-6)
    np.testing.assert_array_equal(lens.target, expected[:, 0])        # default target: top-1
    assert (lens.target_rank[-1] == 1).all()
    assert (lens.kl[-1] == 0).all() and (lens.kl >= 0).all()
    assert lens.top_tokens[-1][-1][0] == " Paris"                    # what SmolLM2 answers
    assert decoder.next_tokens(PROMPT, k=1)[0][0] == " Paris"


# ---- the reductions' fast paths against a whole sort ---------------------------------------------

@pytest.mark.parametrize("k", [1, 10, 48, 49, 300])
def test_top_k_reads_blocks_yet_equals_a_whole_sort_ties_included(k):
    """The lens picks each row's k largest among the k vocabulary blocks with the largest
    maxima (k ≤ 48 of 192 blocks; above, the whole row): the same ids and order as a stable
    sort of the whole row — the largest first, ties the lower id — on rows built to tie:
    equal maxima in many blocks, a tie at the k-th place, and every logit equal."""
    from attnviz.models.readers.lens import _reduce

    rng = np.random.default_rng(k)
    vocab = 49_152
    rows = rng.standard_normal((9, vocab)).astype(np.float32)
    rows[1, rng.choice(vocab, 200, replace=False)] = 9.0       # 200 tied maxima
    rows[2, [5, 77, 40_000, 49_151]] = 7.0                     # four tied at the top
    ranked = np.argsort(-rows[3], kind="stable")
    rows[3, ranked[k - 1:k + 3]] = rows[3, ranked[k - 1]]      # a tie across the k-th place
    rows[4] = 0.5                                              # all equal
    rows[5, :: 192] = 20.0                                     # every maximum in one block
    rows[6] = rng.integers(-3, 3, vocab)                       # few values, ties everywhere
    targets = rng.integers(0, vocab, len(rows))
    ids, logits, lse, chosen, rank, _ = _reduce(rows, targets, k, None)
    x = rows.astype(np.float64)
    expected = np.argsort(-rows, axis=-1, kind="stable")[:, :k]
    np.testing.assert_array_equal(ids, expected)
    np.testing.assert_array_equal(logits, np.take_along_axis(x, expected, axis=-1))
    top = x.max(axis=-1, keepdims=True)
    np.testing.assert_allclose(lse, top[:, 0] + np.log(np.exp(x - top).sum(-1)), rtol=1e-6)
    np.testing.assert_array_equal(chosen, x[np.arange(len(rows)), targets])
    np.testing.assert_array_equal(rank, 1 + (x > chosen[:, None]).sum(-1))


# ---- every row against transformers -------------------------------------------------------------

@pytest.mark.parametrize("text", [PROMPT, OTHER])
def test_every_layer_agrees_with_transformers(torch, decoder, hf_decoder, text):
    lens = decoder.logit_lens(text, k=5)
    expected, final, _, _, _ = _hf_lens(torch, hf_decoder, lens.ids)
    assert expected.shape == (len(lens.rows), len(lens.ids), decoder.vocab_size)
    np.testing.assert_allclose(expected[-1], final, atol=1e-5)       # the reference is sound
    probs = _softmax(expected)                                        # (L + 1, n, vocab)
    for r in range(len(lens.rows)):
        np.testing.assert_allclose(lens.logits(r), expected[r], atol=LOGIT_ATOL, rtol=1e-5,
                                   err_msg=f"row {lens.rows[r]}")
    # top-1 where transformers' first two are apart by more than the logits' tolerance
    ordered = np.sort(expected, axis=-1)
    clear = ordered[..., -1] - ordered[..., -2] > 4 * LOGIT_ATOL
    assert clear.mean() > 0.9
    np.testing.assert_array_equal(lens.top_ids[..., 0][clear], expected.argmax(-1)[clear])
    np.testing.assert_allclose(lens.top_probs,
                               np.take_along_axis(probs, lens.top_ids, axis=-1), atol=1e-3)
    # the target (transformers' own top token at the end), its probability, rank and KL
    target = final.argmax(-1)                                          # (n,)
    rows, cols = np.arange(len(target)), target
    np.testing.assert_allclose(lens.target_prob, probs[:, rows, cols], atol=1e-3)
    chosen = expected[:, rows, cols]                                   # (L + 1, n)
    rank = 1 + (expected > chosen[..., None]).sum(-1)
    close = (np.abs(expected - chosen[..., None]) < 4 * LOGIT_ATOL).sum(-1) - 1   # near ties
    assert (np.abs(lens.target_rank - rank) <= close).all()
    p_final = probs[-1]
    kl = (p_final * (np.log(np.maximum(p_final, 1e-300))
                     - np.log(np.maximum(probs, 1e-300)))).sum(-1)    # (L + 1, n)
    np.testing.assert_allclose(lens.kl, kl, rtol=1e-3, atol=2e-3)


def test_where_paris_becomes_the_answer(torch, decoder, hf_decoder):
    """The rank of " Paris" at the last position, layer by layer, as transformers gives it."""
    lens = decoder.logit_lens(PROMPT, target=" Paris")
    expected, _, _, _, _ = _hf_lens(torch, hf_decoder, lens.ids)
    _, tokenizer = hf_decoder
    paris = tokenizer(" Paris").input_ids
    assert len(paris) == 1 and (lens.target == paris[0]).all()
    last = expected[:, -1]                                             # (L + 1, vocab)
    rank = 1 + (last > last[:, paris]).sum(-1)
    np.testing.assert_array_equal(lens.target_rank[:, -1], rank)
    np.testing.assert_array_equal(lens.rank(" Paris"), lens.target_rank)
    np.testing.assert_array_equal(lens.prob(paris[0]), lens.target_prob)
    first = int(np.argmax(rank == 1))
    assert rank[-1] == 1 and 0 < first < decoder.num_layers + 1
    assert lens.top_ids[first, -1, 0] == paris[0]


# ---- each residual's own statistics --------------------------------------------------------------

def test_each_row_is_normed_with_its_own_statistics(torch, decoder, hf_decoder):
    """A middle row through numpy's RMSNorm of transformers' hidden state with that state's own
    mean square; the final layer's statistics would give other logits (TransformerLens #1076)."""
    model, _ = hf_decoder
    lens = decoder.logit_lens(PROMPT)
    _, _, hidden, _, _ = _hf_lens(torch, hf_decoder, lens.ids)
    gain = model.model.norm.weight.detach().numpy()
    eps = model.config.rms_norm_eps
    unembedding = model.lm_head.weight.detach().numpy().astype(np.float64)   # (vocab, d)
    middle = decoder.num_layers // 2
    expected = _rms_norm(hidden[middle], gain, eps) @ unembedding.T
    got = lens.logits(lens.row(LAYER, middle))
    np.testing.assert_allclose(got, expected, atol=LOGIT_ATOL, rtol=1e-5)
    # the final layer's mean square (of the un-normed last stream) would not do
    final_stream = lens.residuals[-1].astype(np.float64)
    rms_final = np.sqrt((final_stream ** 2).mean(-1, keepdims=True) + eps)
    reused = hidden[middle] / rms_final * gain @ unembedding.T
    assert np.abs(reused - got).max() > 100 * LOGIT_ATOL
    # and scale does not matter: the stream times 7 is the same lens row
    np.testing.assert_allclose(decoder.unembed(lens.residuals[middle] * 7), got,
                               atol=LOGIT_ATOL, rtol=1e-5)


# ---- after each attention sublayer ---------------------------------------------------------------

def test_sublayer_rows_agree_with_transformers(torch, decoder, hf_decoder):
    lens = decoder.logit_lens(PROMPT, sublayers=True, k=3)
    L = decoder.num_layers
    assert len(lens.rows) == 2 * L + 1
    assert lens.rows[:4] == ((LAYER, 0), (ATTENTION, 0), (LAYER, 1), (ATTENTION, 1))
    expected, _, hidden, mid_logits, mids = _hf_lens(torch, hf_decoder, lens.ids,
                                                     sublayers=True)
    for layer in range(L):
        r = lens.row(ATTENTION, layer)
        assert lens.rows[r - 1] == (LAYER, layer) and lens.rows[r + 1] == (LAYER, layer + 1)
        # the stream grows to ~10⁴ at the first token: relative
        np.testing.assert_allclose(lens.residuals[r], mids[layer], rtol=1e-5, atol=1e-3)
        np.testing.assert_allclose(lens.logits(r), mid_logits[layer], atol=LOGIT_ATOL,
                                   rtol=1e-5)
    for layer in range(L):
        np.testing.assert_allclose(lens.logits(lens.row(LAYER, layer)), expected[layer],
                                   atol=LOGIT_ATOL, rtol=1e-5)
    plain = decoder.logit_lens(PROMPT, k=3)        # the same rows in other products
    swapped = lens.top_ids[lens.layer_rows] != plain.top_ids
    np.testing.assert_allclose(lens.top_probs[lens.layer_rows][swapped], plain.top_probs[swapped],
                               rtol=ROUNDING_RTOL)
    np.testing.assert_allclose(lens.kl[lens.layer_rows], plain.kl, rtol=ROUNDING_RTOL, atol=1e-6)


# ---- some positions only (Generate: the one choosing the next token) ------------------------

@pytest.mark.parametrize("sublayers", [False, True])
def test_chosen_positions_are_the_whole_lens_columns(decoder, sublayers):
    whole = decoder.logit_lens(OTHER, k=4, sublayers=sublayers)
    n = len(whole.ids)
    np.testing.assert_array_equal(whole.positions, np.arange(n))
    chosen = [n - 1, 2, 2, -n]                                        # the last, repeated, first
    part = decoder.logit_lens(OTHER, k=4, sublayers=sublayers, positions=chosen)
    columns = [n - 1, 2, 2, 0]
    np.testing.assert_array_equal(part.positions, columns)
    np.testing.assert_array_equal(part.ids, whole.ids)
    assert part.tokens == whole.tokens and part.rows == whole.rows
    # one pass over the text: the same streams, to the bit; their projections: to rounding
    np.testing.assert_array_equal(part.residuals, whole.residuals[:, columns])
    np.testing.assert_array_equal(part.target, whole.target[columns])
    for name in ("top_ids", "top_probs", "target_prob", "target_rank", "kl"):
        _same_up_to_rounding(part, whole, columns, name)
    same = part.top_ids == whole.top_ids[:, columns]                    # (R, n, k)
    assert all(a == b for row_a, row_b, row_same in
               zip(part.top_tokens, [[row[i] for i in columns] for row in whole.top_tokens],
                   same) for cell_a, cell_b, cell_same in zip(row_a, row_b, row_same)
               for a, b, s in zip(cell_a, cell_b, cell_same) if s)
    expected = whole.logits(5)[columns]
    np.testing.assert_allclose(part.logits(5), expected, rtol=0,
                               atol=ROUNDING_ULPS * np.spacing(np.abs(expected).max()))
    assert (np.abs(part.rank(" Paris") - whole.rank(" Paris")[:, columns]) <= 1).all()
    # a target per token of the text: each chosen position's own
    ids = decoder.encode(OTHER)
    targeted = decoder.logit_lens(ids, k=1, target=ids, positions=[3])
    np.testing.assert_array_equal(targeted.target, [ids[3]])
    np.testing.assert_array_equal(targeted.target_rank[:, 0],
                                  decoder.logit_lens(ids, k=1, target=ids).target_rank[:, 3])


def test_the_last_position_alone_agrees_with_transformers(torch, decoder, hf_decoder):
    lens = decoder.logit_lens(PROMPT, k=3, positions=[-1], target=" Paris")
    expected, _, _, _, _ = _hf_lens(torch, hf_decoder, lens.ids)
    assert lens.top_ids.shape == (decoder.num_layers + 1, 1, 3)
    last = expected[:, -1]                                             # (L + 1, vocab)
    for r in range(len(lens.rows)):
        np.testing.assert_allclose(lens.logits(r)[0], last[r], atol=LOGIT_ATOL, rtol=1e-5)
    np.testing.assert_allclose(lens.top_probs[:, 0],
                               np.take_along_axis(_softmax(last), lens.top_ids[:, 0], -1),
                               atol=1e-3)
    assert lens.top_tokens[-1][0][0] == " Paris" and lens.target_rank[-1, 0] == 1


def test_one_position_of_a_generations_longer_text(torch, decoder, hf_decoder):
    """Beyond the whole lens's 512 tokens (a generation's prompt and new tokens reach 768):
    the last position of 530 tokens, as transformers' final logits give it."""
    model, _ = hf_decoder
    ids = np.resize(decoder.encode(PROMPT + " Paris."), 530)
    with raises_message("error.whole_number", name="max_tokens"):
        decoder.logit_lens(ids, max_tokens=530)
    lens = decoder.logit_lens(ids, k=2, positions=[-1], max_tokens=530)
    assert list(lens.positions) == [529] and len(lens.ids) == 530
    with torch.no_grad():
        final = model(torch.tensor([ids.tolist()])).logits[0, -1].numpy()
    np.testing.assert_allclose(lens.logits(-1)[0], final, atol=LOGIT_ATOL, rtol=1e-5)
    assert lens.top_ids[-1, 0, 0] == final.argmax()


def test_positions_are_checked(decoder):
    n = len(decoder.encode(PROMPT))
    with raises_message("error.lens.positions", shape="()", tokens=n):
        decoder.logit_lens(PROMPT, positions=3)
    with raises_message("error.lens.positions", shape="(0,)", tokens=n):
        decoder.logit_lens(PROMPT, positions=[])
    with raises_message("error.whole_number", name="positions"):
        decoder.logit_lens(PROMPT, positions=[n])
    with raises_message("error.whole_number", name="positions"):
        decoder.logit_lens(PROMPT, positions=[1.5])


# ---- inputs ----------------------------------------------------------------------------------

def test_ids_targets_and_errors(decoder):
    ids = decoder.encode(PROMPT)
    lens = decoder.logit_lens(ids, k=2, target=ids[1:6].tolist(),
                              max_tokens=5)
    assert lens.top_ids.shape == (decoder.num_layers + 1, 5, 2) and lens.kl.shape == (31, 5)
    np.testing.assert_array_equal(lens.target, ids[1:6])
    with raises_message("error.lens.not_one_token", text=" Eiffel Tower", count=3):
        decoder.logit_lens(PROMPT, target=" Eiffel Tower")
    with raises_message("error.lens.target_shape", tokens=len(ids), shape="(2,)"):
        decoder.logit_lens(PROMPT, target=[1, 2])
    with raises_message("error.lens.row", kind=ATTENTION, layer=3):
        lens.row(ATTENTION, 3)
    with raises_message("error.layer.ids"):
        decoder.logit_lens(np.array([decoder.vocab_size]))


# ---- the figures ---------------------------------------------------------------------------------

def test_the_grid_writes_each_cells_top_token_and_colours_it_by_its_probability():
    from attnviz.plot.lens_figures import lens_grid, rank_line, top_bars

    probs = np.array([[[0.9, 0.1], [0.5, 0.3]], [[0.6, 0.2], [0.4, 0.35]]])   # (R, n, k)
    labels = [[["a<b", "c"], ["␣d", "e"]], [["f", "g"], ["␣Eiffel", "i"]]]
    fig = lens_grid(probs, labels, row_labels=["embeddings", "after layer 0"],
                    col_labels=["The", "␣cat"], title="lens", hover_top=2)
    cell = fig.data[0]
    np.testing.assert_array_equal(np.asarray(cell.z), probs[..., 0])
    # a cell writes at most 6 characters (issue 34.10: they overflowed their cells at 1024 px)
    assert [list(row) for row in cell.text] == [["a&lt;b", "␣d"], ["f", "␣Eiff…"]]
    marks = fig.data[1]                                  # the hovers: one marker per cell
    assert list(marks.x) == ["0: The", "1: ␣cat"] * 2
    assert list(marks.y) == ["embeddings"] * 2 + ["after layer 0"] * 2
    assert marks.customdata[3] == "␣Eiffel  0.400<br>i  0.350" and cell.hoverinfo == "skip"
    assert list(cell.y) == ["embeddings", "after layer 0"] and (cell.zmin, cell.zmax) == (0, 1)
    bars = top_bars(["x", "y"], [0.7, 0.2], title="top")
    assert list(bars.data[0].x) == [0.7, 0.2] and list(bars.data[0].y) == ["1. x", "2. y"]
    line = rank_line([300, 12, 1], row_labels=["a", "b", "c"], title="rank")
    assert list(line.data[0].y) == [300, 12, 1] and line.layout.yaxis.type == "log"


def test_the_grid_can_be_coloured_by_another_probability():
    from attnviz.plot.lens_figures import lens_grid

    probs = np.array([[[0.9, 0.1]], [[0.6, 0.2]]])                    # (R, n, k)
    labels = [[["a", "b"]], [["c", "d"]]]
    target = np.array([[0.05], [0.6]])
    fig = lens_grid(probs, labels, row_labels=["r0", "r1"], col_labels=["x"], title="lens",
                    colour=target, colour_name="answer", hover_top=1)
    np.testing.assert_array_equal(np.asarray(fig.data[0].z), target)
    assert fig.data[1].customdata[0] == "answer: 0.050<br>a  0.900"
    with raises_message("error.figure.shape", name="colour", shape="(1, 1)", want="(2, 1)"):
        lens_grid(probs, labels, row_labels=["r0", "r1"], col_labels=["x"], title="lens",
                  colour=np.ones((1, 1)), colour_name="answer")


# ---- a run's lens, its last column first (the Trace page's grid) ----------------------------

def test_a_runs_lens_reads_its_streams_and_hands_over_the_last_column_first(decoder):
    """Given a run, the lens reads the streams it kept (the pass's, to the bit); with
    `first`, the last column alone is handed over before the rest, the same numbers as the
    whole lens's last column; the rest agree with a lens of the text up to rounding."""
    from attnviz.models.readers.lens import logit_lens

    run = decoder.run(OTHER)
    whole = decoder.logit_lens(OTHER, k=4)
    n = len(whole.ids)
    seen = []
    lens = logit_lens(decoder, run, k=4, first=seen.append)
    np.testing.assert_array_equal(lens.residuals, run.hidden_states)     # the run's, to the bit
    # the text's own pass (plain attention, where the run's is the engine's trace): its rounding
    scale = np.abs(run.hidden_states).max(axis=-1, keepdims=True)
    assert (np.abs(lens.residuals - whole.residuals) <= 1e-5 * scale).all()
    [column] = seen
    assert column.positions.tolist() == [n - 1] and column.rows == lens.rows
    for name in ("top_ids", "top_probs", "target_prob", "target_rank", "kl", "residuals"):
        np.testing.assert_array_equal(getattr(column, name), getattr(lens, name)[:, -1:])
    assert column.target.tolist() == lens.target[-1:].tolist() == whole.target[-1:].tolist()
    names = ("top_ids", "top_probs", "target_prob", "target_rank", "kl")
    before = SimpleNamespace(**{name: getattr(lens, name)[:, :-1] for name in names})
    for name in names:
        _same_up_to_rounding(before, whole, list(range(n - 1)), name)
    # the last column's final distribution is the one-row product's (next_logits): a float32
    # KL there — Σ p (log p − log q) over 49,152 logits of ~10² — moves with its rounding by
    # ~10⁻³ nats (as far as either is from the same KL in float64)
    np.testing.assert_allclose(lens.kl[:, -1], whole.kl[:, -1], atol=2e-3)
    last = SimpleNamespace(top_ids=lens.top_ids[:, -1:], top_probs=lens.top_probs[:, -1:])
    _same_up_to_rounding(last, whole, [n - 1], "top_ids")     # another product: swaps at ties
    # that column is a lens of the last position alone (Compare models reads it): to the bit
    alone, kept = decoder.logit_lens(run, k=3, positions=[-1]), lens.last_column(3)
    assert kept.positions.tolist() == alone.positions.tolist() == [n - 1]
    for name in ("top_ids", "top_probs", "target", "target_prob", "target_rank", "kl",
                 "residuals"):
        np.testing.assert_array_equal(getattr(kept, name), getattr(alone, name), err_msg=name)
