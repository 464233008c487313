"""A link reopens every Gemma 3 view in a fresh session (issue 38, Checks): each decoder page on
``model=gemma3-270m`` — Pretrained model's three tabs, every tab of Read the model, Trace the
answer's logit lens, tuned lens, patching and flow, Generate, the decoder experiments, Step by
step and Multi-head on a Gemma layer, Compare models — opened with picks that are not its
defaults, writes its link; that link opened in a new session shows the same model, every widget
with the same value, the view's chart (found by its title's message id, or its key) and every
chart titled as before."""

from __future__ import annotations

import numpy as np
import pytest

from attnviz.i18n import t
from tests.apptest_helpers import (charts, charts_keyed, charts_titled, no_exceptions, open_page,
                                   title_text, widget_values)

GEMMA = "gemma3-270m"
TEXT = "The cat sat on the mat because it was tired"
OTHER = "A dog ran in the park."

# view: (page, the picks a learner made, the chart the view draws: a title's message id and
# parameters, or a chart's key)
VIEWS = {
    "pretrained-head": ("pretrained", dict(pt_dec_layer=5, pt_dec_head=2),
                        ("pretrained.one_head.title", dict(layer=5, head=2))),
    "pretrained-model-view": ("pretrained", dict(pt_view=t("pretrained.tab.model_view")),
                              "pt_dec_model_view"),
    "pretrained-head-view": ("pretrained", dict(pt_view=t("pretrained.tab.head_view"),
                                                pt_dec_hv_layer=3, pt_dec_hv_token=2,
                                                pt_dec_hv_heads=[0, 3]), "pt_dec_head_view"),
    "reading-rollout": ("reading", dict(rd_view=t("reading.tab.rollout"), ro_layer=4,
                                        ro_residual=False),
                        ("reading.rollout.title", dict(layer=4))),
    "reading-value": ("reading", dict(rd_view=t("reading.tab.value"), vw_layer=5, vw_head=3),
                      ("reading.value.weights_title", dict(layer=5, head=3))),
    "reading-stats": ("reading", dict(rd_view=t("reading.tab.stats"), hs_column="sink",
                                      hs_layer=5, hs_head=1), ("reading.stats.sink", {})),
    "reading-ablation": ("reading", dict(rd_view=t("reading.tab.ablation"), ab_heads="L3H2, L5",
                                         ab_other=OTHER), ("reading.ablation.map.title", {})),
    "reading-lens": ("reading", dict(rd_view=t("reading.tab.lens"), lens_position=3,
                                     lens_colour="target"),
                     ("reading.lens.bars_title", dict(position=3))),
    "trace-lens": ("trace", dict(tr_view=t("trace.tab.lens"), lens_layer=10, lens_position=2),
                   ("reading.lens.bars_title", dict(position=2))),
    "trace-tuned-lens": ("trace", dict(tr_view=t("trace.tab.lens"), lens_kind="tuned",
                                       lens_position=4),
                         ("reading.lens.tuned.kl_title", dict(tokens=11))),
    "trace-patching": ("trace", dict(tr_view=t("trace.tab.patching"), tr_where="heads",
                                     tr_layer=3), None),
    "trace-flow": ("trace", dict(tr_view=t("trace.tab.flow"), fl_position=4, fl_threshold=0.1,
                                 fl_heads=False), ("trace.flow.title", dict(position=4))),
    "generate": ("generate", dict(gen_prompt="The capital of France is", gen_sampling="sample",
                                  gen_seed=3, gen_layer=7), ("figure.generate.next.title", {})),
    "experiments-window": ("experiments", dict(experiment=t("experiments.tab.window")),
                           ("figure.experiment.window.title", {})),
    "experiments-qk": ("experiments", dict(experiment=t("experiments.tab.qk"), exp_qk_text=OTHER),
                       ("figure.experiment.qk.title", {})),
    "experiments-kv": ("experiments", dict(experiment=t("experiments.tab.kv")),
                       ("figure.experiment.kv.title", {})),
    "steps": ("steps", dict(mode="Pretrained model", layer=5, head=2, step="q_normed"),
              ("figure.title.head", dict(title=t("step.q_normed.title"), head=2))),
    "multihead": ("multihead", dict(mode="Pretrained model", layer=11, mh_head=3,
                                    mh_section=t("multihead.tab.concat")),
                  ("step.concat.title", {})),
    "compare": ("compare", dict(cmp_a=GEMMA, cmp_b="smollm2", cmp_layer_a=5, cmp_head_a=1),
                ("figure.compare.head.title", dict(model="Gemma 3 270M", layer=5, head=1))),
}


@pytest.fixture
def a_tuned_lens_at_hand(monkeypatch):
    """Gemma's tuned lens at hand without its fit (which is not what this test checks): each
    translator the identity, so the page draws the tuned view (its KL chart) at once."""
    from attnviz.models.readers import tuned_lens
    from attnviz.models.decoders.decoder import DecoderModel

    m = DecoderModel.load(name=GEMMA)
    d = m.d_model
    identity = np.concatenate([np.eye(d), np.zeros((1, d))]).astype(np.float32)
    lens = tuned_lens.TunedLens(np.stack([identity] * m.num_layers), tokens=1, eps=1e-6,
                                outcome="verified")
    key = (str(m.path), str(tuned_lens.cache_folder(m)))            # this process's, as kept
    monkeypatch.setitem(tuned_lens._LOADED, key, lens)


def shows_chart(at, chart) -> bool:
    if chart is None:                 # patching before its run: the button starting it
        return any(b.key == "tr_patch" for b in at.button)
    if isinstance(chart, str):
        return bool(charts_keyed(at, chart))
    msg_id, params = chart
    return bool(charts_titled(at, msg_id, **params))


@pytest.mark.slow
@pytest.mark.parametrize("view", VIEWS)
def test_a_gemma_views_link_reopens_it_in_a_fresh_session(view, request):
    page, picks, chart = VIEWS[view]
    if view == "trace-tuned-lens":
        request.getfixturevalue("a_tuned_lens_at_hand")
    at = open_page(f"pages/{page}.py", params={"lang": "en"}, model=GEMMA, sentence=TEXT,
                   **picks)
    assert not at.error, [e.value for e in at.error]
    assert shows_chart(at, chart)
    link = {k: v[0] if isinstance(v, list) else v for k, v in at.query_params.items()}
    assert link["model"] == GEMMA
    again = open_page(f"pages/{page}.py", params=link)
    no_exceptions(again)
    assert again.session_state["model"] == GEMMA
    assert {k: again.session_state[k] for k in picks} == picks
    assert widget_values(again) == widget_values(at)
    assert shows_chart(again, chart)
    assert [title_text(f) for f in charts(again)] == [title_text(f) for f in charts(at)]
    assert not again.warning and not again.sidebar.warning      # no notice about the link
