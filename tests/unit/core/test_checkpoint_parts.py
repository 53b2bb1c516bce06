"""A checkpoint is whole only with every rank's marker."""

from __future__ import annotations

from pathlib import Path

from tunedeck.core.checkpoint_parts import mark_part_written, missing_parts, part_marker_name, written_by


def test_markers_say_which_parts_are_written(tmp_path: Path) -> None:
    folder = tmp_path / "checkpoint-4"
    folder.mkdir()
    assert written_by(folder) == 1 and missing_parts(folder, 1) == []  # one process: no markers needed
    assert missing_parts(folder, 3) == [0, 1, 2]
    mark_part_written(folder, 0, 3)
    mark_part_written(folder, 2, 3)
    assert missing_parts(folder, 3) == [1] and written_by(folder) == 3
    mark_part_written(folder, 1, 3)
    assert missing_parts(folder, 3) == []
    assert (folder / part_marker_name(1, 3)).read_text() == "done\n"
    assert missing_parts(tmp_path / "absent", 2) == [0, 1]
