"""`python -m enginelab MODEL [options]`: the calculator in a terminal (enginelab.cli)."""

import sys

from .cli import main

if hasattr(sys.stdout, "reconfigure"):  # a model's name the terminal's encoding lacks prints as '?', not an error
    sys.stdout.reconfigure(errors="replace")
    sys.stderr.reconfigure(errors="replace")
raise SystemExit(main())
