"""The pretrained encoder all-MiniLM-L6-v2: ``pretrained`` (``PretrainedModel``, traced layer by
layer), ``bert_checkpoint`` (its files read without running anything: config, tensors,
tokenizer, one layer's weights) and ``bert_layer`` (the one BERT layer around attention)."""
