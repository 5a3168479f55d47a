"""Glassbox: chat with local GGUF models and watch what happens under the hood."""

__version__ = "0.1.0"
APP_NAME = "Glassbox"
