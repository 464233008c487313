"""Five learners patching at once on a real server (issue 34): each opens its own pair by a
link, presses Patch and polls the page's live fragment as a browser does; every patching
finishes (its effect map shown), each learner saw its place in the queue or its progress, and
the progress moved. (benchmarks/bench_load.py --patch 10 measures the observer's first chart.)"""

from __future__ import annotations

import asyncio

import pytest

from benchmarks.bench_load import Patcher, Words
from tools import streamlit_client
from tests.browser_helpers import streamlit_server

pytestmark = pytest.mark.slow

LEARNERS = 5


def test_five_learners_patching_their_own_pairs_at_once_all_finish():
    registry = Words(per_session=1, seed=0)
    with streamlit_server(300, options=("--server.disconnectedSessionTTL", "10")) as (url, _):
        async def storm():
            loop = asyncio.get_running_loop()
            patchers = [Patcher(k, registry.take(k), url, registry, 300.0, where="mlp")
                        for k in range(LEARNERS)]
            return await asyncio.gather(*(p.patch(loop.time(), deadline=600)
                                          for p in patchers))

        results = streamlit_client.run(storm())
    for r in results:
        assert not r.errors, r.errors
        assert r.finished is not None, (r.index, r.places, r.progress)
        assert r.places or r.progress, r.index            # its place or its progress, live
        assert r.progress == sorted(r.progress)            # never backwards
    assert any(0 < p < r.total for r in results for p in r.progress), \
        [r.progress for r in results]                      # seen moving, not only 0 or done
