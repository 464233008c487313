"""The sidebar every page shares, one module per job: ``panel`` (which sidebar a page gets:
its settings, the real model's fixed ones, or a line saying the page has its own), and the parts
it is made of — ``input_source`` (where the input comes from), ``real_model`` (a pretrained
model's choice and layer, and its own settings shown fixed), ``sizes`` (the sizes and the
weights), ``options`` (scaling, mask, positions, the token limit) and ``fixed`` (a setting the
input or the model fixes, shown disabled with the reason).

Every widget's key is a Settings field, so `state.settings()` reads them all back.
"""
