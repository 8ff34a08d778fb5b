"""`python -m enginelab MODEL [options]`: the calculator in a terminal (enginelab.cli)."""

import os
import sys

from .cli import main

if hasattr(sys.stdout, "reconfigure"):  # a model's name the terminal's encoding lacks prints as '?', not an error
    sys.stdout.reconfigure(errors="replace")
    sys.stderr.reconfigure(errors="replace")
try:
    code = main()
    sys.stdout.flush()
except BrokenPipeError:  # the reader closed the pipe (`| head`): the rest is not wanted
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    code = 0
raise SystemExit(code)
