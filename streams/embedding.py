"""Embeddings for recall (section 9): one small interface, and a default that runs offline.

Recall compares a query's vector with each memory's by cosine. Any embedder fits as long as it
names its model and dimension, which a world's first vectors fix (vectors of another model or
dimension are refused later), and hands back unit-length rows, so cosine is a dot product.

The default is WordLlama (`wordllama` on PyPI): static 256-dimension token embeddings averaged
over a text, weights and tokenizer shipped inside the wheel. Nothing is ever downloaded: the
loader is told not to, and is pointed at the package's own folder, whose `tokenizers/` holds the
tokenizer it would otherwise look for under `tokenizer/` and then fetch.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

import numpy as np
import numpy.typing as npt
import wordllama

Vectors = npt.NDArray[np.float32]
"""One row per text, `dimension` columns."""


class Embedder(Protocol):
    """Turns texts into vectors of one model and dimension."""

    @property
    def model(self) -> str:
        """Which model made the vectors: vectors of different models never mix."""

    @property
    def dimension(self) -> int:
        """How many numbers a vector has."""

    def embed(self, texts: Sequence[str]) -> Vectors:
        """One unit-length float32 row per text, in order; all zeros for a text with no words.

        The same text gives the same row, whatever else is in the batch.
        """


class WordLlamaEmbedder:
    """WordLlama's `l2_supercat` 256-dimension embeddings, loaded from the installed wheel."""

    CONFIG = "l2_supercat"
    DIMENSION = 256

    def __init__(self) -> None:
        package_dir = Path(wordllama.__file__).parent
        self._model = wordllama.WordLlama.load(
            config=self.CONFIG,
            dim=self.DIMENSION,
            cache_dir=package_dir,
            disable_download=True,
        )

    @property
    def model(self) -> str:
        return f"wordllama/{self.CONFIG}"

    @property
    def dimension(self) -> int:
        return self.DIMENSION

    def embed(self, texts: Sequence[str]) -> Vectors:
        if not texts:
            return np.zeros((0, self.DIMENSION), dtype=np.float32)
        pooled: Vectors = self._model.embed(list(texts), norm=False)
        lengths = np.linalg.norm(pooled, axis=1, keepdims=True)
        unit: Vectors = np.divide(pooled, lengths, out=np.zeros_like(pooled), where=lengths > 0)
        return unit
