"""Golden SVG files: a figure's render compared byte for byte with tests/golden/<name>.svg.

Every test compares its goldens through `golden()`, the one helper. On a mismatch (or a missing golden) the new
text is written next to the golden as tests/golden/<name>-changed.svg (ignored by git) and the assertion names
that file, so the change can be reviewed with `diff tests/golden/<name>.svg tests/golden/<name>-changed.svg`.
When the render matches again, a stale -changed file is removed.

After an intended change, regenerate by hand with ENGINELAB_UPDATE_GOLDEN=1 and review the diff (never in CI)."""

from __future__ import annotations

import os
from pathlib import Path

GOLDEN = Path(__file__).parent / "golden"
UPDATE_ENV = "ENGINELAB_UPDATE_GOLDEN"


def golden(name: str, text: str, newline: bool = False, *, directory: Path | None = None, update: bool | None = None):
    """Compare `text` (plus a final newline when `newline`) with <directory>/<name>.svg (tests/golden by default).

    update: write `text` as the new golden (default: ENGINELAB_UPDATE_GOLDEN=1 in the environment)."""
    directory = GOLDEN if directory is None else Path(directory)
    update = os.environ.get(UPDATE_ENV) == "1" if update is None else update
    text = text + "\n" if newline else text
    path = directory / f"{name}.svg"
    changed = directory / f"{name}-changed.svg"
    if update:
        path.write_text(text, encoding="utf-8")
    if path.exists() and path.read_text(encoding="utf-8") == text:
        changed.unlink(missing_ok=True)  # a review file left from an earlier mismatch
        return
    changed.write_text(text, encoding="utf-8")
    if not path.exists():
        raise AssertionError(
            f"missing golden {path}: the render is in {changed}; review it, then rename it to {path.name} "
            f"(or run with {UPDATE_ENV}=1)"
        )
    raise AssertionError(
        f"{path.name} changed: the new render is in {changed}; review `diff {path} {changed}`, then regenerate "
        f"with {UPDATE_ENV}=1"
    )
