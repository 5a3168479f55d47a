"""The window's side of the load settings remembered per model file. The owner is the settings
(:meth:`~app.core.settings.Settings.load_for`, :meth:`~app.core.settings.Settings.with_load_for`,
``model_load``, kept by :class:`~app.ui.window.settings_controller.SettingsController`); which model
they are for is :attr:`ModelLoader.current_path <app.ui.window.model_loader.ModelLoader.current_path>`,
which also sends each load with them. This module wires what the window adds around them:

- load settings are remembered for the model shown only when applied: Apply (the reload,
  :meth:`ModelLoader.reload_with`) remembers them; the context policy, which applies to the next reply
  without a reload, is remembered as soon as it is changed; any other edit not applied stays in the
  fields until another model loads, and then goes (it was never remembered);
- the panel's :class:`~app.ui.panels.load_memory.LoadMemoryBox` says "remembered for this file" or
  "Glassbox's defaults", and which edits are not applied yet, follows the model, the fields and the
  settings, and its Reset is an edit like any other: the fields show Glassbox's defaults, nothing is
  forgotten until Apply (which reloads with them and forgets the file's load settings), and another
  model loading first drops it; its template button forgets the file's chat template override at once;
- the Library shows what the selected file will load with (``LibraryTab.set_load_summary``).

"The defaults" are Glassbox's built-in :class:`~app.core.chat.context.LoadSettings` (never the last
model's); a file is known by its resolved absolute path (:func:`~app.ui.window.model_loader.model_key`).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from app.core.chat.context import LoadSettings
from app.core.settings import Settings
from app.ui.models.library_tab import LibraryTab
from app.ui.panels.model import ModelPanel
from app.ui.window.model_change import ModelChange, ModelPhase
from app.ui.window.model_loader import ModelLoader, model_key
from app.ui.window.settings_controller import SettingsController


def load_summary(settings: Settings, path: str | Path) -> str:
    """What the file at ``path`` will be loaded with, for the Library: the settings in the field's
    terms, then whether they are remembered for it or Glassbox's defaults, and its template override."""
    key = model_key(str(path))
    remembered = settings.remembered_load(key)
    ls = settings.load_for(key)
    terms = " · ".join(ls.terms()[:7])
    where = "remembered for this file" if remembered is not None else "Glassbox's defaults"
    template = "; your chat template override" if settings.chat_template_for(key) is not None else ""
    return f"Loads with {terms} ({where}{template})"


class PerModelSettings:
    """Connects the load settings remembered per file to the Model panel and the Library (see the module docstring).

    Args:
        loader: the model loader (which model the settings are for; it remembers them).
        settings: the settings (the per-file load settings and chat template overrides).
        panel: the Model panel (its fields and its :attr:`~ModelPanel.memory` box).
        library: the Models page's Library tab (what the selected file will load with).
    """

    def __init__(
        self, loader: ModelLoader, settings: SettingsController, panel: ModelPanel, library: LibraryTab
    ) -> None:
        self._loader = loader
        self._settings = settings
        self._panel = panel
        self._library = library
        library.set_load_summary(self._summary)
        panel.load_settings_edited.connect(self._edited)
        panel.memory.reset_requested.connect(self.reset)
        panel.memory.template_reset_requested.connect(self.reset_template)
        settings.changed.connect(lambda _s: self.refresh())
        loader.model_changed.connect(self._model_changed)
        self.refresh()

    def reset(self) -> None:
        """Put Glassbox's defaults in the fields, as an edit not applied yet: the file's settings stay
        remembered until Apply reloads with the defaults (remembering the defaults forgets them,
        :meth:`Settings.with_load_for <app.core.settings.Settings.with_load_for>`); another model loading
        first drops the edit. The context policy, which needs no reload, goes back at once, as its edit does."""
        self._panel.show_fields(LoadSettings())
        self._edited(self._panel.load_settings())  # the policy at once; the rest not applied yet

    def reset_template(self) -> None:
        """Forget the chat template override of the model shown (the GGUF's template is used)."""
        path = self._loader.current_path
        if path is not None:
            self._settings.apply(lambda s: s.with_chat_template(path, None))

    def refresh(self, *, fields_reset: bool = False) -> None:
        """Say where the shown model's load settings come from, which edits are not applied yet, and whether
        it has a template override (``fields_reset``: the panel's fields are about to show the model's
        settings, so none is unapplied)."""
        path = self._loader.current_path
        s = self._settings.settings
        template = path is not None and s.chat_template_for(path) is not None
        unapplied = () if fields_reset else self._panel.unapplied()
        to_defaults = bool(unapplied) and self._panel.load_settings() == LoadSettings()
        self._panel.memory.show_memory(path, s.remembered_load(path), template, unapplied, to_defaults=to_defaults)
        self._library.show_details()  # the selected file's line, again

    def _edited(self, s: LoadSettings) -> None:
        """A field changed. The context policy applies to the next reply, so a new one is remembered for the
        model shown at once; the rest waits for Apply (and is dropped if another model loads first)."""
        current = self._loader.current_load
        if self._loader.current_path is not None and s.context_policy != current.context_policy:
            self._loader.remember(replace(current, context_policy=s.context_policy))  # refreshes
        else:
            self.refresh()

    def _summary(self, path: Path) -> str:
        return load_summary(self._settings.settings, path)

    def _model_changed(self, change: ModelChange) -> None:
        # The panel's show_model (connected after this) puts the model's settings in the fields: edits not
        # applied for the model before go with it.
        self.refresh(fields_reset=change.phase in (ModelPhase.LOADING, ModelPhase.LOADED))
