"""The session model, without Streamlit: what the sidebar asks for (settings), what the
computation will use (in_use), the user's edited matrices and how they travel in a link
(edits), the View every page draws and what is read from it (view), building it (build), an
edit that makes a step overflow (overflow), a view in a file and back (view_files), which
views the pages offer for a model (model_views), and the models' runs the pages share, one
module per kind of run (encoder_runs, decoder_runs). The app (attnviz.app) keeps these in
st.session_state and draws them; a test or a notebook uses them alone."""
