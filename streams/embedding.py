"""Embeddings for recall (section 9): one small interface, and a default that runs offline.

Recall compares a query's vector with each memory's by cosine. Any embedder fits as long as it
names its model and dimension, which a world's first vectors fix (vectors of another model or
dimension are refused later), and hands back unit-length rows, so cosine is a dot product.

The default is WordLlama (`wordllama` on PyPI): static 256-dimension token embeddings averaged
over a text, weights and tokenizer shipped inside the wheel. Nothing is ever downloaded: the
loader is told not to, and is pointed at the package's own folder, whose `tokenizers/` holds the
tokenizer it would otherwise look for under `tokenizer/` and then fetch.

The embedding agent shares the ingest agent's core (`streams.embedding_agent`), and the
tokenizer was most of its cost: WordLlama tokenizes each text whole (Llama's BPE with no
pre-tokenizer). Its merges never join across a single space (the only vocabulary entries with an
inner `▁` are runs of `▁`), so the tokens of a text whose words are parted by single spaces are
the tokens of each word in turn: each word is tokenized once and kept, and a batch is pooled in
one gather. The vectors are WordLlama's own.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import chain
from pathlib import Path
from typing import Protocol

import numpy as np
import numpy.typing as npt
from tokenizers import Tokenizer

from streams.logs import root_logger_kept

with root_logger_kept():  # WordLlama calls logging.basicConfig(level=INFO) when imported
    import wordllama

Vectors = npt.NDArray[np.float32]
"""One row per text, `dimension` columns."""

WORDLLAMA_DIR = Path(wordllama.__file__).parent


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
    TOKENIZER_FILE = WORDLLAMA_DIR / "tokenizers" / f"{CONFIG}_tokenizer_config.json"
    PIECES_KEPT = 1 << 14
    """Words (and odd texts) whose token sums are kept, 1 KiB each (16 MiB in all); all
    forgotten when full, and learnt again as they come (a game's vocabulary is smaller)."""

    def __init__(self) -> None:
        model = wordllama.WordLlama.load(
            config=self.CONFIG,
            dim=self.DIMENSION,
            cache_dir=WORDLLAMA_DIR,
            disable_download=True,
        )
        self._table: Vectors = model.embedding
        self._tokenizer = Tokenizer.from_file(str(self.TOKENIZER_FILE))
        self._rows: dict[str, int] = {}
        """Each piece's row in `_sums` and `_counts`; row 0 is the empty piece (padding)."""
        self._sums: Vectors = np.zeros((1024, self.DIMENSION), dtype=np.float32)
        self._counts: Vectors = np.zeros(1024, dtype=np.float32)

    @property
    def model(self) -> str:
        return f"wordllama/{self.CONFIG}"

    @property
    def dimension(self) -> int:
        return self.DIMENSION

    def embed(self, texts: Sequence[str]) -> Vectors:
        pieces = [_pieces(text) for text in texts]
        flat = list(chain.from_iterable(pieces))
        self._learn(flat)
        widths = np.fromiter(map(len, pieces), dtype=np.intp, count=len(pieces))
        padded = np.zeros((len(pieces), int(widths.max(initial=0))), dtype=np.intp)
        padded[np.arange(padded.shape[1]) < widths[:, np.newaxis]] = np.fromiter(
            map(self._rows.__getitem__, flat), dtype=np.intp, count=len(flat)
        )
        sums = np.zeros((len(pieces), self.DIMENSION), dtype=np.float32)
        gathered = np.empty_like(sums)
        for column in padded.T:  # a column at a time: no (texts, words, 256) array to fault in
            # into one array reused; "clip" takes straight into it (every row is one of ours)
            sums += self._sums.take(column, axis=0, out=gathered, mode="clip")
        counts = self._counts[padded].sum(axis=1, keepdims=True)
        sums /= np.maximum(counts, 1.0)  # WordLlama's mean over a text's tokens
        lengths = np.linalg.norm(sums, axis=1, keepdims=True)
        wordless = lengths[:, 0] == 0  # no words, or numbers so small their squares vanish
        lengths[wordless] = 1.0
        sums /= lengths
        sums[wordless] = 0.0  # a row of zeros, as WordLlama's own normalisation leaves it
        return sums

    def _learn(self, pieces: list[str]) -> None:
        """Tokenize the pieces not seen yet and keep each one's token sum and count."""
        fresh = set(pieces).difference(self._rows)
        if not fresh:
            return
        if len(self._rows) + len(fresh) >= self.PIECES_KEPT:
            self._rows.clear()
            fresh = set(pieces)
        needed = len(self._rows) + len(fresh) + 1
        if needed > len(self._sums):
            grown = max(needed, min(2 * len(self._sums), self.PIECES_KEPT + 1))
            self._sums = np.resize(self._sums, (grown, self.DIMENSION))
            self._counts = np.resize(self._counts, grown)
        for row, piece in enumerate(sorted(fresh), len(self._rows) + 1):
            # one at a time: a batch would wake the tokenizer's thread pool for a few words
            tokens = self._tokenizer.encode(piece.removeprefix(" "), add_special_tokens=False)
            ids = np.clip(np.asarray(tokens.ids, dtype=np.intp), 0, len(self._table) - 1)
            self._sums[row] = self._table[ids].sum(axis=0, dtype=np.float32)
            self._counts[row] = len(ids)
            self._rows[piece] = row


def _pieces(text: str) -> list[str]:
    """The pieces a text's tokens are the tokens of, in order: its words, when single spaces
    part them; else the whole text, marked by a leading space (no word has one), as runs of
    `▁` may merge across its words."""
    words = text.split(" ")
    if "▁" in text or ("" in words and text):
        return [" " + text]
    return words
