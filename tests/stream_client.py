"""A browser's first visit of one page, spoken over Streamlit's websocket protocol (no
browser): a new session's `rerun_script` with the page's URL path and query string, read until
the script run ends.

Self-contained (the standard library, websockets and Streamlit's protos only), so that it
also runs where the app runs, inside its container:

    python - URL PAGE[?QUERY] …  < tests/stream_client.py      # one JSON line per page

(tests/test_image.py runs it so in a container that has no network but its loopback.)
"""

from __future__ import annotations

import json
import sys
import time

# every page by URL path, and the title it shows (English: a new browser session)
TITLES = {"steps": "Step by step", "home": "Self-attention, one step at a time",
          "inputs": "Inputs & weights", "multihead": "Multi-head attention",
          "experiments": "Experiments", "pretrained": "Pretrained model",
          "reading": "Read the model", "trace": "Trace the answer",
          "train": "Train attention yourself", "generate": "Generate, one token at a time",
          "atlas": "Head atlas"}
CHARTS = {"steps", "home", "multihead", "experiments", "pretrained", "reading"}   # at once
SIDEBAR = 1          # a delta path's first index: 0 the main area, 1 the sidebar


def open_page(url: str, page: str, query: str = "", timeout: float = 240) -> dict:
    """A new browser session opening `url`/`page` (Home: "home", the root) with `query` over
    Streamlit's websocket, until the script run ends: the session's config and id, main
    script, the titles, Markdown texts and element types shown, the labels of the sidebar's
    text boxes, the navigation's pages (title, URL path) as its last navigation message lists
    them and the one it marks current, whether the page was not found, any exception, and the
    seconds from the request to the first chart and to the end of the run."""
    from websockets.sync.client import connect

    from tools import streamlit_compat

    seen = {"titles": [], "texts": [], "types": set(), "exceptions": [], "config": None,
            "script": None, "session_id": None, "first_chart": None, "finished": None,
            "sidebar_text_inputs": [], "navigation": [], "current": None, "not_found": False}
    msg = streamlit_compat.back_msg()
    msg.rerun_script.page_name = "" if page == "home" else page
    msg.rerun_script.query_string = query
    with connect(url.replace("http", "ws", 1) + "/_stcore/stream",
                 subprotocols=["streamlit", "PLACEHOLDER_AUTH_TOKEN"], max_size=None,
                 open_timeout=30) as ws:
        t0 = time.perf_counter()
        ws.send(msg.SerializeToString())
        while True:
            fwd = streamlit_compat.forward_msg(ws.recv(timeout=timeout))
            kind = fwd.WhichOneof("type")
            if kind == "new_session":
                seen["config"] = fwd.new_session.config
                seen["script"] = fwd.new_session.main_script_path
                seen["session_id"] = fwd.new_session.initialize.session_id
            elif kind == "navigation":
                pages = fwd.navigation.app_pages
                seen["navigation"] = [(p.page_name, p.url_pathname) for p in pages]
                seen["current"] = next((p.url_pathname for p in pages if p.page_script_hash
                                        == fwd.navigation.page_script_hash), None)
            elif kind == "page_not_found":
                seen["not_found"] = True
            elif kind == "delta" and fwd.delta.WhichOneof("type") == "new_element":
                element = fwd.delta.new_element
                seen["types"].add(element.WhichOneof("type"))
                if element.WhichOneof("type") == "heading":
                    seen["titles"].append(element.heading.body)
                elif element.WhichOneof("type") == "markdown":       # captions too
                    seen["texts"].append(element.markdown.body)
                elif element.WhichOneof("type") == "exception":
                    seen["exceptions"].append(element.exception.message)
                elif element.WhichOneof("type") == "text_input" \
                        and fwd.metadata.delta_path[0] == SIDEBAR:
                    seen["sidebar_text_inputs"].append(element.text_input.label)
                elif element.WhichOneof("type") == "plotly_chart" and not seen["first_chart"]:
                    seen["first_chart"] = time.perf_counter() - t0
            elif kind == "script_finished":
                seen["finished"] = time.perf_counter() - t0
                return seen


def as_json(seen: dict) -> dict:
    """`open_page`'s answer with its protos and sets made plain."""
    config = seen["config"]
    return {**seen, "types": sorted(seen["types"]),
            "config": None if config is None else {
                "gather_usage_stats": config.gather_usage_stats,
                "toolbar_mode": config.toolbar_mode}}


def main(argv: list[str]) -> None:
    url, pages = argv[0], argv[1:]
    for spec in pages:
        page, _, query = spec.partition("?")
        print(json.dumps({"page": spec, **as_json(open_page(url, page, query))}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
