"""PyInstaller runtime hook: runs in the frozen app before `app` is imported.

The default model ships inside the app folder (`_internal/models/`), read in place (memory-mapped, never
copied). Point ROOFLINE_DEFAULT_MODEL at it unless the user chose another default; child processes
(the engine) inherit the setting.
"""

import os
import sys

_bundled = os.path.join(getattr(sys, "_MEIPASS", ""), "models", "gemma-3-270m-q4_k_m.gguf")
if os.path.isfile(_bundled):
    os.environ.setdefault("ROOFLINE_DEFAULT_MODEL", _bundled)
