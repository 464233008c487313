"""The toy trainer: ``toy`` (a tiny transformer trained with torch inside, numpy out),
``toy_tasks`` (its tasks), ``toy_plan`` (its plan: work, time, verdict; no torch) and
``training`` (the server's training pool running them)."""
