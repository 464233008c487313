"""The server process's runtime: what the app switches on once when it starts
(startup: the threads, the memory sweeper, the session's language, the log), the
garbage collector kept cheap, and the one module that uses Streamlit's internals."""
