"""The Models page: the model library, the Hugging Face Hub browser and downloads.

:class:`~app.ui.models.window.ModelsWindow` is the one entry point; the tabs
and item models are in the other modules of this package.
"""

from app.ui.models.window import ModelsWindow

__all__ = ["ModelsWindow"]
