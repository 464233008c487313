"""Real models traced by the core's engine, in five folders: ``decoders`` (``DecoderModel``, its
GGUF reader and its one layer), ``encoder`` (the pretrained encoder all-MiniLM-L6-v2),
``readers`` (the logit and tuned lens, patching, information flow, the head atlas), ``trainer``
(the tiny transformers a learner trains) and ``catalogue`` (the registry of models a learner
chooses, the built-in decoders, Gemma's licences). What all of them share stays here:
``disk_cache``, ``finite``, ``sizes`` and ``heavy`` (the server's queue for heavy work)."""
