"""evalpipe: experiment-tracked evaluation of retrieval systems."""

__version__ = "0.1.0"
