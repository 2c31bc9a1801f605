"""Embeddings: the exported ONNX model gives sentence-transformers' own vectors, and a process with the
export in its cache embeds without loading torch."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
from django.conf import settings

from knowledge import embeddings
from knowledge.embeddings import embed, embed_and_score

TEXTS = [
    "hello world",
    "  Error code X7-4471 means the fibre cable is unplugged.  ",
    "Hold the reset button on the back for ten seconds until the lights blink orange. " * 40,  # > 256 tokens
    "",
    *[f"Question {i}: how long does delivery to region {i} take?" for i in range(70)],  # more than one batch
]


def test_vectors_are_those_of_sentence_transformers():
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(embeddings.model_dir(), device="cpu", local_files_only=True)
    model.max_seq_length = embeddings.MAX_MODEL_TOKENS
    expected = model.encode(TEXTS, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False)
    vectors = embed(TEXTS)
    assert vectors.dtype == np.float32 and vectors.shape == (len(TEXTS), 384)
    assert np.abs(vectors - expected).max() < 1e-5
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert embed([]).shape == (0, 384)
    # A long text is cut at the model's limit like sentence-transformers cuts it, not rejected.
    assert float(vectors[2] @ expected[2]) > 0.9999


def test_scores_are_the_cosine_similarities_with_every_row():
    rows = embed(["Invoices are sent on the first day of each month.", "Hold the reset button.", "Bananas."])
    scores = embed_and_score("when do invoices arrive", rows)
    assert scores.shape == (3,)
    assert np.allclose(scores, rows @ embed(["when do invoices arrive"])[0], atol=1e-5)
    assert int(np.argmax(scores)) == 0
    assert embed_and_score("anything", np.zeros((0, 384), dtype=np.float32)).shape == (0,)


EMBED_AND_REPORT = (
    "import json, os, sys, django; django.setup()\n"
    "from knowledge.embeddings import embed, onnx_path\n"
    "vector = embed(['hello world'])[0]\n"
    "print(json.dumps({'torch': 'torch' in sys.modules, 'path': str(onnx_path()), "
    "'files': sorted(os.listdir(os.environ['KNOWLEDGE_MODEL_CACHE'])), 'head': [float(x) for x in vector[:4]]}))"
)


def _embedding_process(cache: str) -> subprocess.Popen:
    env = {**os.environ, "KNOWLEDGE_MODEL_CACHE": cache, "DJANGO_SETTINGS_MODULE": "voiceagent.settings"}
    env["LOG_LEVEL"] = "INFO"
    return subprocess.Popen(
        [sys.executable, "-c", EMBED_AND_REPORT],
        cwd=settings.BASE_DIR,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _report(process: subprocess.Popen) -> dict:
    """What the process printed, and whether it logged that it made the export."""
    out, err = process.communicate(timeout=600)
    assert process.returncode == 0, err
    return {**json.loads(out.strip().splitlines()[-1]), "exported": "exporting the embedding model" in err}


def test_processes_that_start_at_once_make_one_export_and_none_loads_torch(tmp_path):
    together = [_report(process) for process in [_embedding_process(str(tmp_path)) for _ in range(2)]]
    assert sorted(report["exported"] for report in together) == [False, True]  # one export, the other waited
    name = os.path.basename(together[0]["path"])
    for report in together:
        assert report["torch"] is False  # the export ran in a process of its own
        assert report["files"] == [name, f"{name}.lock"]  # the model and its lock, no temporary left behind
        assert np.allclose(report["head"], together[0]["head"])
    later = _report(_embedding_process(str(tmp_path)))
    assert later["exported"] is False and later["torch"] is False
    assert later["files"] == together[0]["files"]
    assert np.allclose(later["head"], together[0]["head"])
    assert np.allclose(later["head"], embed(["hello world"])[0][:4], atol=1e-6)
