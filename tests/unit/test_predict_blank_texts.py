"""``ftplat predict`` refuses a blank TEXT argument (usually an unset shell variable) before it
loads the model, while ``--file`` skips blank lines, which only separate texts."""

from __future__ import annotations

import pytest

from ftplat.cli.main import main as ftplat_main


@pytest.mark.parametrize(("texts", "number"), [([""], 1), (["great", "  "], 2), (["great", "\n", "fine"], 2)])
def test_a_blank_text_argument_is_one_error_line(texts, number, tmp_path, capsys):
    code = ftplat_main(["predict", str(tmp_path / "no-model"), *texts])
    captured = capsys.readouterr()
    assert code == 2 and captured.out == ""
    err = captured.err.splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: argument {number} ({texts[number - 1]!r}) is blank: "), err
    assert "only --file skips blank lines" in err[0]


def test_blank_lines_of_a_file_are_still_skipped(tmp_path, capsys):
    (tmp_path / "texts.txt").write_text("great\n\n   \nfine\n")
    # The inputs are read before the model is: a missing model folder is the first refusal.
    assert ftplat_main(["predict", str(tmp_path / "no-model"), "--file", str(tmp_path / "texts.txt")]) == 2
    assert "holds no config.json" in capsys.readouterr().err
