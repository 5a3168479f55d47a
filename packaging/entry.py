"""The bundle's entry point (PyInstaller's script, packaging/glassbox.spec): ``freeze_support`` first.

In a frozen Glassbox the engine process is this same executable, started by
multiprocessing's ``spawn`` with ``--multiprocessing-fork``; ``freeze_support()``
(PyInstaller's runtime hook makes it work on Linux too) runs the child's work and
exits before anything of the app (Qt included) is imported.
"""

import multiprocessing

if __name__ == "__main__":
    multiprocessing.freeze_support()
    from app.main import main

    raise SystemExit(main())
