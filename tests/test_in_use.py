"""What the sidebar shows as in use where a mode fixes a setting (attnviz.session.in_use)."""

from types import SimpleNamespace

from attnviz.core.modes import Mode
from attnviz.session.in_use import in_use
from attnviz.session.settings import TOY_MODE, Settings


def test_the_toy_model_and_typed_q_k_v_show_one_k_v_head_per_head():
    """Issue 34.10: the Toy model's disabled K-V heads box was empty. torch's
    MultiheadAttention (the toy's) has one K/V head per head; typed Q, K, V are one head."""
    config = SimpleNamespace(task="copy", heads=2, d_model=8, causal=False)  # a run's ToyConfig
    toy = SimpleNamespace(run=SimpleNamespace(config=config))
    use = in_use(Settings(mode=TOY_MODE), toy)
    assert (use.num_heads, use.kv_heads) == (2, 2) and use.kv_fixed is not None
    use = in_use(Settings(mode=Mode.QKV.value, q_text="1 2\n3 4", k_text="1 2\n3 4",
                          v_text="1 2\n3 4"))
    assert (use.num_heads, use.kv_heads) == (1, 1)
