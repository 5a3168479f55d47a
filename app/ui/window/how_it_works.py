"""Help → How it works: a non-modal window walking the pipeline with the loaded model's figures.

The sections and figures come from :func:`app.core.inspection.pipeline_guide.pipeline_guide`; this module
draws them as rich text and turns a section's links into the window's own actions
(:meth:`HowItWorks.open_live_view`): a dock's View-menu toggle then ``raise_``, the Models page,
and for Inspect the Tokens panel with a hint on the banner.
"""

from __future__ import annotations

import html

from PySide6.QtCore import QUrl, Signal
from PySide6.QtWidgets import QDialog, QDialogButtonBox, QTextBrowser, QVBoxLayout, QWidget

from app.core.inspection.pipeline_guide import LIVE_LABELS, GuideSection, LiveView, pipeline_guide
from app.core.protocol import ModelLoaded
from app.core.sampling.params import SamplerSettings
from app.ui.chat.chat_settings import ChatSettingsController
from app.ui.common import palette
from app.ui.common.severity import Severity
from app.ui.window.docks import DockRegistry
from app.ui.window.model_change import ModelChange
from app.ui.window.model_loader import ModelLoader
from app.ui.window.notices import Notices, NoticeTopic
from app.ui.window.pages import Page, Pages

LIVE_SCHEME = "live"  # a section's link: live:<LiveView value>
INSPECT_HINT = (
    "<b>Inspect a token</b>: in the Tokens panel, click a token of a reply (or of the prompt) and choose "
    "<i>Inspect this token</i> for its logit lens, attention, embedding and, in an MoE model, experts."
)


def guide_html(sections: tuple[GuideSection, ...], model_name: str | None) -> str:
    """The whole guide as rich text: a contents line, then each section with its figures and links.

    Links: ``#key`` to a section, ``live:<view>`` to where Glassbox shows it live.
    """
    css = (
        f"<style>h2 {{ color: {palette.TEXT}; font-size: large; margin-top: 12px; }} a {{ color: {palette.LINK}; }}"
        f" td.k {{ color: {palette.MUTED}; padding-right: 10px; }} td.v {{ color: {palette.TEXT_SOFT}; }}"
        f" p.live {{ color: {palette.TEXT_DIM}; }}</style>"
    )
    who = f"Figures of <b>{html.escape(model_name)}</b>, read from its file." if model_name else ""
    toc = " · ".join(f"<a href='#{s.key}'>{html.escape(s.title.split('. ', 1)[-1])}</a>" for s in sections)
    out = [css, f"<p>The pipeline, in order. {who}</p>", f"<p>{toc}</p>"]
    for s in sections:
        rows = "".join(
            f"<tr><td class='k'>{html.escape(k)}</td><td class='v'>{html.escape(v)}</td></tr>" for k, v in s.figures
        )
        links = " · ".join(f"<a href='{LIVE_SCHEME}:{v.value}'>{LIVE_LABELS[v]}</a>" for v in s.live)
        out.append(
            f"<a name='{s.key}'></a><h2>{html.escape(s.title)}</h2><p>{html.escape(s.text)}</p>"
            f"<table cellspacing='2'>{rows}</table><p class='live'>Live: {links}</p>"
        )
    return "".join(out)


class HowItWorksWindow(QDialog):
    """The How it works window (not modal; closing hides it, the next open shows it again).

    Signals:
        live_view_chosen(LiveView): a section's "Live:" link was followed.

    Attributes:
        browser: the guide's text (Tab moves between links, Enter follows one).
        sections: the sections shown now.
    """

    live_view_chosen = Signal(object)  # LiveView

    def __init__(self, loaded: ModelLoaded | None, sampler: SamplerSettings, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("How it works")
        self.setObjectName("howItWorks")
        self.setModal(False)
        self._loaded = loaded
        self._sampler = sampler
        lay = QVBoxLayout(self)
        self.browser = QTextBrowser()
        self.browser.setObjectName("howItWorksText")
        self.browser.setAccessibleName("How it works: the pipeline, step by step")
        self.browser.setOpenLinks(False)
        self.browser.anchorClicked.connect(self.follow)
        lay.addWidget(self.browser)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.close)
        lay.addWidget(buttons)
        self.sections: tuple[GuideSection, ...] = ()
        self.resize(620, 640)
        self._render()

    def set_model(self, loaded: ModelLoaded | None) -> None:
        """Show ``loaded``'s figures (None: no model); the same model again changes nothing."""
        if loaded is not self._loaded:
            self._loaded = loaded
            self._render()

    def set_sampler(self, sampler: SamplerSettings) -> None:
        """Show the sampler chain of ``sampler``."""
        if sampler != self._sampler:
            self._sampler = sampler
            self._render()

    def follow(self, url: QUrl) -> None:
        """A link: ``#key`` scrolls to that section, ``live:<view>`` emits :attr:`live_view_chosen`."""
        if url.scheme() == LIVE_SCHEME:
            self.live_view_chosen.emit(LiveView(url.path()))
        elif url.fragment():
            self.browser.scrollToAnchor(url.fragment())

    def _render(self) -> None:
        self.sections = pipeline_guide(self._loaded, self._sampler)
        name = self._loaded.info.name if self._loaded is not None else None
        bar = self.browser.verticalScrollBar()
        at = bar.value()
        self.browser.setHtml(guide_html(self.sections, name))
        bar.setValue(at)


class HowItWorks:
    """Help → How it works: its window (made on first use, then shown again), kept up to date with
    the loaded model and the sampler settings, and where its "Live:" links lead.

    Args:
        parent: the guide window's parent.
        loader: the model loader (the model whose figures are shown).
        chat_settings: what applies to the chat shown (the sampler chain shown).
        docks: the window's docks (where each view is shown live).
        pages: the window's pages.
        notices: where the hint on inspecting a token is said.
    """

    def __init__(
        self,
        parent: QWidget,
        loader: ModelLoader,
        chat_settings: ChatSettingsController,
        docks: DockRegistry,
        pages: Pages,
        notices: Notices,
    ) -> None:
        self._parent = parent
        self._loader = loader
        self._chat_settings = chat_settings
        self._docks = docks
        self._pages = pages
        self._notices = notices
        self.window: HowItWorksWindow | None = None

    def open(self) -> HowItWorksWindow:
        """Show the guide (made on first use) and bring it forward."""
        win = self.window
        if win is None:
            win = self.window = HowItWorksWindow(
                self._loader.engine.model, self._chat_settings.current.sampler, self._parent
            )
            # A failed load, an unload or a stopped engine leaves no model: the change carries none.
            self._loader.model_changed.connect(lambda change: self._model_changed(win, change))
            self._chat_settings.changed.connect(lambda cs: win.set_sampler(cs.sampler))
            win.live_view_chosen.connect(self.open_live_view)
        win.show()
        win.raise_()
        win.activateWindow()
        return win

    def _model_changed(self, win: HowItWorksWindow, change: ModelChange) -> None:
        win.set_model(change.loaded)

    def open_live_view(self, view: LiveView) -> None:
        """Bring forward where ``view`` is shown live: a dock's View-menu toggle (when it is hidden)
        then raised, the Models page, or for :attr:`LiveView.INSPECT` the Tokens panel and the
        notice's hint on how to inspect a token."""
        view = LiveView(view)
        if view is LiveView.MODELS_PAGE:
            self._pages.show_page(Page.MODELS)
            return
        dock = self._docks.showing(view)
        if dock is None:
            return
        toggle = dock.toggleViewAction()
        if not toggle.isChecked():
            toggle.trigger()
        dock.raise_()
        if view is LiveView.INSPECT:
            self._pages.show_page(Page.CHAT)
            self._notices.show(NoticeTopic.GENERAL, Severity.INFO, INSPECT_HINT)
