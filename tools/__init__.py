"""What drives a running attnviz from outside, shared by the tests and the benchmarks: a
Streamlit server of the app (``server``), a page opened in AppTest (``apptest``), the browser's
websocket protocol without a browser (``streamlit_client``), a headless Chromium on the app
(``browser``), the pages at the largest inputs the app allows (``largest_pages``), and the one
module that reaches into Streamlit's private parts for them (``streamlit_compat``).

Here, not in tests/, so that a benchmark measures with the very drivers the tests check
without importing a test module (tests/test_architecture.py: benchmarks/ imports nothing from
tests/); not in attnviz/, because no user of the package needs them (the image holds the app
only). tools/lock.sh, beside them, pins the versions the tests ran with.
"""
