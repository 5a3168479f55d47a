"""UI pieces shared by every page: formatting, the worker-thread pool, dialogs, the palette."""
