"""Optional extras (the export runtimes, MLflow): a module imported when a setting needs it, or an
ImportError that names the setting and the pip line that installs it. Pure Python: must not import
TensorFlow or the optional modules themselves at module level.
"""

from __future__ import annotations

import importlib
from types import ModuleType


def require_module(module: str, needed_by: str, install: str) -> ModuleType:
    """`module` imported, or ImportError: `NEEDED_BY needs MODULE, which is not installed: INSTALL`."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise ImportError(f"{needed_by} needs {module}, which is not installed: {install}") from None
