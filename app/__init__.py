"""Glassbox: chat with local GGUF models and watch what happens under the hood."""

__version__ = "0.1.0"
APP_NAME = "Glassbox"
#: Reverse-DNS application id: the .desktop file, the icon names, the AppStream metainfo and
#: QGuiApplication.setDesktopFileName use it (packaging/desktop.py writes the files from it).
APP_ID = "io.github.glassbox.Glassbox"
