"""Golden SVG files: a figure's render compared byte for byte with tests/golden/<name>.svg.

After an intended change, regenerate by hand with ENGINELAB_UPDATE_GOLDEN=1 and review the diff (never in CI)."""

import os
from pathlib import Path

GOLDEN = Path(__file__).parent / "golden"
UPDATE = os.environ.get("ENGINELAB_UPDATE_GOLDEN") == "1"


def golden(name: str, text: str, newline: bool = False):
    """Compare `text` (plus a final newline when `newline`) with tests/golden/<name>.svg."""
    text = text + "\n" if newline else text
    path = GOLDEN / f"{name}.svg"
    if UPDATE:
        path.write_text(text)
    assert path.exists(), f"missing golden {path}: run with ENGINELAB_UPDATE_GOLDEN=1 and review it"
    assert text == path.read_text(), f"{name}.svg changed: review, then regenerate with ENGINELAB_UPDATE_GOLDEN=1"
