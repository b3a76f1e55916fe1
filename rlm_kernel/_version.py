"""The package's version, at the bottom of the layers: any module may import it
(``from .._version import __version__``) without importing the package's root, which
reaches up into the engine and the Jupyter layer.  The same number as ``version`` in
``pyproject.toml``."""

__version__ = "0.1.0"
