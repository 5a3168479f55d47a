"""Runtime assets (stylesheet, icons, desktop entry). Installed as the package ``app.resources``."""
