"""Many tasks, each an independent RLM run, on a Dask cluster (``rlm batch``)."""
