"""What reads a decoder's insides: ``lens`` (the logit lens), ``tuned_lens`` (its affine
translators, fitted and kept on disk), ``patching`` (activation patching), ``flow`` (information
flow routes), and the head atlas — ``atlas`` (the reduction over a corpus), ``atlas_map`` (a
head's joint query/key map, related heads) and ``atlas_runners`` (where the reduce runs: spawned
processes or Ray actors)."""
