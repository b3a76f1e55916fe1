"""The Jupyter layer, thin over the engine: the RLM kernel (``kernel``) and its prose
routing (``prose``), the ``%rlm`` magic (``magic``), the executor that runs steps through
the kernel's shell (``shell_executor``), the comm protocol and inline rendering for
JupyterLab (``frontend``), the run's widgets (``widgets``) and the kernelspec
installer (``install``)."""
