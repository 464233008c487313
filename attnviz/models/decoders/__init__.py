"""The decoder family: ``decoder`` (``DecoderModel``: any decoder of the four families from
its GGUF, run, generation with a KV cache, the readers' entry points), ``gguf_llama`` (the GGUF
reader: ``DecoderConfig``, ``FAMILIES``, the converter, the tokenizers, the converted model's
cache), ``llama_layer`` (the one decoder layer every path calls), ``layer_steps`` (a real
decoder layer step by step) and ``decoder_reading`` (the head ranking and the head detector's
sequence)."""
