"""The exercises page's Python: one PyScript worker shared by every cell (py-editor env "lab").

Set up once when the page loads (the page's <script type="py-editor" setup src=...>), it exposes two functions
through pyscript.sync, which the page (site/assets/exercises.js) calls and awaits:

    enginelab_ping()          -> "ready" once everything below has run
    enginelab_run(n, code)    -> JSON of enginelab.exercises.run_cell(n, code): output, traceback, charts, verdict

The worker never reaches back into the page (the config sets "sync_main_only": true), so it needs no
SharedArrayBuffer, and the page works from any plain static file server: no COOP/COEP headers, no service worker.
"""

import json
import os
import sys

sys.path.insert(0, os.path.abspath("lib"))  # where PyScript unpacked our wheel (the page's config "files")

from pyscript import sync  # noqa: E402

from enginelab import exercises  # noqa: E402

exercises.warm()  # the checkers' references and the placement plans, so a first Run is as fast as later ones
# One dry run through the whole path (exec, plot, check): Pyodide's first pass over new code paths is slow
# (the WebAssembly engine compiles hot code lazily), and a learner's first Run should not pay for it.
exercises.run_cell(2, exercises.EXERCISES[2].solution)


def enginelab_run(n, code):
    return json.dumps(exercises.run_cell(int(n), str(code)))


def enginelab_ping():
    return "ready"


sync.enginelab_run = enginelab_run
sync.enginelab_ping = enginelab_ping
