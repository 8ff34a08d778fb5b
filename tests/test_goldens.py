"""tests/goldens.py, the one golden helper: a mismatch leaves <name>-changed.svg for review, a match removes it."""

from __future__ import annotations

import pytest
from goldens import golden


def test_a_match_passes_and_removes_a_stale_changed_file(tmp_path):
    (tmp_path / "fig.svg").write_text("<svg/>\n")
    stale = tmp_path / "fig-changed.svg"
    stale.write_text("<svg>old review copy</svg>\n")
    golden("fig", "<svg/>", newline=True, directory=tmp_path, update=False)
    assert not stale.exists()
    golden("fig", "<svg/>\n", directory=tmp_path, update=False)  # no -changed file to remove: still fine
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fig.svg"]


def test_a_mismatch_writes_the_changed_file_and_names_it(tmp_path):
    (tmp_path / "fig.svg").write_text("<svg>before</svg>\n")
    with pytest.raises(AssertionError) as err:
        golden("fig", "<svg>after</svg>", newline=True, directory=tmp_path, update=False)
    changed = tmp_path / "fig-changed.svg"
    assert changed.read_text() == "<svg>after</svg>\n"
    assert str(changed) in str(err.value) and "fig.svg changed" in str(err.value)
    assert (tmp_path / "fig.svg").read_text() == "<svg>before</svg>\n"  # the golden itself is never touched
    # the render matches again: the review file goes away
    golden("fig", "<svg>before</svg>", newline=True, directory=tmp_path, update=False)
    assert not changed.exists()


def test_a_missing_golden_fails_and_leaves_the_render_for_review(tmp_path):
    with pytest.raises(AssertionError) as err:
        golden("new", "<svg/>", directory=tmp_path, update=False)
    assert "missing golden" in str(err.value) and str(tmp_path / "new-changed.svg") in str(err.value)
    assert (tmp_path / "new-changed.svg").read_text() == "<svg/>"
    assert not (tmp_path / "new.svg").exists()


def test_update_writes_the_golden(tmp_path):
    (tmp_path / "fig.svg").write_text("<svg>before</svg>\n")
    (tmp_path / "fig-changed.svg").write_text("<svg>after</svg>\n")
    golden("fig", "<svg>after</svg>", newline=True, directory=tmp_path, update=True)
    assert (tmp_path / "fig.svg").read_text() == "<svg>after</svg>\n"
    assert not (tmp_path / "fig-changed.svg").exists()


def test_the_default_follows_the_environment(tmp_path, monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    (tmp_path / "fig.svg").write_text("a")
    monkeypatch.setenv("ENGINELAB_UPDATE_GOLDEN", "1")
    golden("fig", "b", directory=tmp_path)
    assert (tmp_path / "fig.svg").read_text() == "b"
    monkeypatch.delenv("ENGINELAB_UPDATE_GOLDEN")
    with pytest.raises(AssertionError):
        golden("fig", "c", directory=tmp_path)


@pytest.mark.parametrize("ci", ["true", "1"])
def test_ci_refuses_the_update_variable_and_leaves_the_golden_alone(tmp_path, monkeypatch, ci):
    (tmp_path / "fig.svg").write_text("a")
    monkeypatch.setenv("CI", ci)
    monkeypatch.setenv("ENGINELAB_UPDATE_GOLDEN", "1")
    with pytest.raises(AssertionError, match="ENGINELAB_UPDATE_GOLDEN=1 is refused while CI="):
        golden("fig", "b", directory=tmp_path)
    assert (tmp_path / "fig.svg").read_text() == "a"
    assert not (tmp_path / "fig-changed.svg").exists()
    # even a render that matches is refused: the variable itself is the error in CI
    with pytest.raises(AssertionError, match="refused"):
        golden("fig", "a", directory=tmp_path)
    # without the update variable, CI compares as usual
    monkeypatch.delenv("ENGINELAB_UPDATE_GOLDEN")
    golden("fig", "a", directory=tmp_path)
    with pytest.raises(AssertionError, match="fig.svg changed"):
        golden("fig", "b", directory=tmp_path)
    assert (tmp_path / "fig.svg").read_text() == "a"


def test_an_empty_ci_variable_is_not_ci(tmp_path, monkeypatch):
    (tmp_path / "fig.svg").write_text("a")
    monkeypatch.setenv("CI", "")
    monkeypatch.setenv("ENGINELAB_UPDATE_GOLDEN", "1")
    golden("fig", "b", directory=tmp_path)
    assert (tmp_path / "fig.svg").read_text() == "b"
