"""The Pretrained model page: its ``render()`` in ``page``, its model, run, tokens and pickers in
``pretrained_view`` (Read the model and Trace the answer use them too), the page with a causal
model chosen in ``decoder_page``."""
