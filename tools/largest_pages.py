"""Every page and tab at the largest inputs the app allows (512 tokens; d_model 1024; 16 heads;
the Pretrained model's 512 WordPiece tokens; a pinned baseline; the second sentences), each as
the state a session is seeded with: the cases the figure budget's test
(tests/test_figure_budget.py) and benchmarks/bench_app.py --largest open, on every colour scale
(SCALES)."""

from __future__ import annotations

from attnviz.app.shared.baseline import Pin
from attnviz.i18n import t
from attnviz.session.settings import Settings

BUDGET = 3_000_000              # SPEC: "the figures a page sends ≤ 3 MB", as UTF-8 bytes
SCALES = ("fixed", "head", "row")
WORDS = " ".join(f"w{i}" for i in range(600))                      # cut to 512 tokens
TEXT = ("The animal didn't cross the street because it was too tired, and the river ran on "
        "past the old mill. ") * 40                                 # > 512 WordPiece tokens
TOY = dict(sentence=WORDS, max_tokens=512)
WIDE = dict(TOY, d_model=1024, num_heads=1)         # the largest matrices: 512 × 1024, 1024²
HEADS = dict(TOY, d_model=64, num_heads=16)         # the most facets
MODEL = dict(sentence=TEXT, max_tokens=512)
PIN = Pin(Settings(sentence=WORDS, max_tokens=512, d_model=1024, num_heads=1, seed=1), {})

# (id, page, seeded state); each page is opened as the session's first run (open_page); a tab
# is seeded by its label, t(its id)
CASES = [
    ("home-16-heads", "pages/home.py", HEADS),
    ("home-d1024", "pages/home.py", WIDE),
    ("home-causal", "pages/home.py", dict(HEADS, causal=True)),
    *[(f"inputs-{m}", "pages/inputs.py", dict(WIDE, matrix=m)) for m in ("x", "w_q", "w_o")],
    *[(f"steps-{s}", "pages/steps.py", dict(WIDE, step=s, vector_view=True))
      for s in ("x", "q", "scores", "weights", "weighted_values", "z", "concat", "output")],
    ("steps-weights-causal", "pages/steps.py",
     dict(WIDE, step="weights", causal=True, vector_view=True)),
    ("steps-masked-causal", "pages/steps.py", dict(WIDE, step="masked_scores", causal=True)),
    ("steps-weights-baseline", "pages/steps.py",
     dict(WIDE, step="weights", vector_view=True, baseline=PIN)),
    ("steps-output-baseline", "pages/steps.py", dict(WIDE, step="output", baseline=PIN)),
    ("steps-pretrained", "pages/steps.py",
     dict(MODEL, mode="Pretrained model", step="weights", vector_view=True)),
    *[(f"multihead-{name}", "pages/multihead.py", dict(WIDE, mh_section=t(f"multihead.tab.{s}")))
      for name, s in (("z", "z"), ("concat", "concat"), ("w_o", "output"))],
    ("multihead-16-heads", "pages/multihead.py",
     dict(HEADS, mh_section=t("multihead.tab.output"))),
    ("multihead-second-sentence", "pages/multihead.py",
     dict(WIDE, mh_section=t("multihead.tab.second"), mh_compare=WORDS + " x")),
    *[(f"experiments-{name}", "pages/experiments.py",
       dict(WIDE, experiment=t(f"experiments.tab.{name}"), **extra))
      for name, extra in (                      # (the sources' values: "tutorial", YOUR_X)
          ("scaling", {}), ("tied", {"exp_tied_source": "your input X"}),
          ("raw", {"exp_raw_source": "your input X"}), ("order", {}), ("masks", {}),
          ("cross", {"exp_cross_text": WORDS}), ("bug", {}))],
    ("pretrained-one-head", "pages/pretrained.py",
     dict(MODEL, pt_view=t("pretrained.tab.one_head"))),
    ("pretrained-second-sentence", "pages/pretrained.py",
     dict(MODEL, pt_view=t("pretrained.tab.one_head"), pt_compare=TEXT.replace("animal", "dog"))),
    ("pretrained-model-view", "pages/pretrained.py",
     dict(MODEL, pt_view=t("pretrained.tab.model_view"))),
    ("pretrained-head-view", "pages/pretrained.py",
     dict(MODEL, pt_view=t("pretrained.tab.head_view"))),
    *[(f"reading-{t(tab)}", "pages/reading.py", dict(MODEL, rd_view=t(tab)))
      for tab in ("reading.tab.rollout", "reading.tab.value", "reading.tab.stats",
                  "reading.tab.ablation")],
]
