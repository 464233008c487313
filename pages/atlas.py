"""Head atlas: the page's body is attnviz/app/atlas/page.py, inside the app of app.py
(attnviz.app.main.page_file)."""

from attnviz.app import main

main.page_file(__file__)
