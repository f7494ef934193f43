"""The optional C module (_fast.c): None when it was not built, or when
XPJIT_PYTHON_PURE is set (the package then runs in pure Python)."""
import os

try:
    if os.environ.get("XPJIT_PYTHON_PURE"):
        raise ImportError("XPJIT_PYTHON_PURE is set")
    from . import _fast
except ImportError:
    _fast = None
