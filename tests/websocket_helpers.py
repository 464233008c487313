"""A browser's session without the browser: Streamlit's websocket protocol, one script run."""

from __future__ import annotations

from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

SIDEBAR = 1          # a delta path's first index: 0 the main area, 1 the sidebar


def open_page(url: str, page: str, timeout: float = 240) -> dict:
    """A new browser session opening `url`/`page` (Home: "home", the root) over Streamlit's
    websocket, until the script run ends: the session's config and main script; the titles
    and element types shown; the labels of the sidebar's text boxes; the navigation's pages
    (title, URL path) as its last navigation message lists them, and the page it marks
    current (its URL path); whether the page was not found; any exception."""
    from websockets.sync.client import connect

    seen = {"titles": [], "types": set(), "exceptions": [], "config": None, "script": None,
            "sidebar_text_inputs": [], "navigation": [], "current": None, "not_found": False}
    msg = BackMsg()
    msg.rerun_script.page_name = "" if page == "home" else page
    with connect(url.replace("http", "ws") + "/_stcore/stream",
                 subprotocols=["streamlit", "PLACEHOLDER_AUTH_TOKEN"], max_size=None,
                 open_timeout=30) as ws:
        ws.send(msg.SerializeToString())
        while True:
            fwd = ForwardMsg()
            fwd.ParseFromString(ws.recv(timeout=timeout))
            kind = fwd.WhichOneof("type")
            if kind == "new_session":
                seen["config"] = fwd.new_session.config
                seen["script"] = fwd.new_session.main_script_path
            elif kind == "navigation":
                pages = fwd.navigation.app_pages
                seen["navigation"] = [(p.page_name, p.url_pathname) for p in pages]
                seen["current"] = next((p.url_pathname for p in pages if p.page_script_hash
                                        == fwd.navigation.page_script_hash), None)
            elif kind == "page_not_found":
                seen["not_found"] = True
            elif kind == "delta" and fwd.delta.WhichOneof("type") == "new_element":
                element = fwd.delta.new_element
                what = element.WhichOneof("type")
                seen["types"].add(what)
                if what == "heading":
                    seen["titles"].append(element.heading.body)
                elif what == "exception":
                    seen["exceptions"].append(element.exception.message)
                elif what == "text_input" and fwd.metadata.delta_path[0] == SIDEBAR:
                    seen["sidebar_text_inputs"].append(element.text_input.label)
            elif kind == "script_finished":
                return seen
