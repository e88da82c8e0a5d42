"""The default embedder: offline, 256 numbers a text, and close for texts that mean the same."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from streams.embedding import WordLlamaEmbedder

UNRELATED = "the weather was sunny over the mountains"
PARAPHRASES = [
    ("Mara healed the wounded soldier", "she cured an injured warrior"),
    ("The dragon burned the village", "a wyrm set fire to our town"),
    ("Where was he last seen?", "any idea of his final whereabouts"),
    ("a sailor attacked Ilse", "seaman assaulted her"),
]
"""Pairs that mean the same and share no word."""

NO_NETWORK = """
import sys
def refuse(event, args):
    if event in ("socket.connect", "socket.getaddrinfo"):
        raise RuntimeError(f"network use: {event} {args}")
sys.addaudithook(refuse)
from streams.embedding import WordLlamaEmbedder
vectors = WordLlamaEmbedder().embed(["I will find your son."])
print(vectors.shape[1])
"""


@pytest.fixture(scope="module")
def embedder() -> WordLlamaEmbedder:
    return WordLlamaEmbedder()


def words(text: str) -> set[str]:
    return set(text.lower().strip("?.").split())


def cosine(embedder: WordLlamaEmbedder, first: str, second: str) -> float:
    one, other = embedder.embed([first, second])
    return float(one @ other)


@pytest.mark.parametrize(("original", "paraphrase"), PARAPHRASES)
def test_a_paraphrase_sharing_no_word_is_close_and_an_unrelated_sentence_is_not(
    embedder: WordLlamaEmbedder, original: str, paraphrase: str
) -> None:
    assert not words(original) & words(paraphrase)
    close = cosine(embedder, original, paraphrase)
    assert close >= 0.3
    assert close >= cosine(embedder, original, UNRELATED) + 0.2


def test_vectors_are_256_unit_rows_whatever_the_batch(embedder: WordLlamaEmbedder) -> None:
    texts = [original for original, _ in PARAPHRASES]
    batch = embedder.embed(texts)
    assert (embedder.dimension, embedder.model) == (256, "wordllama/l2_supercat")
    assert batch.shape == (len(texts), 256) and batch.dtype == np.float32
    assert np.allclose(np.linalg.norm(batch, axis=1), 1.0)
    alone = np.vstack([embedder.embed([text]) for text in texts])
    assert np.array_equal(batch, alone)


def test_a_text_without_words_gives_a_zero_row_not_nan(embedder: WordLlamaEmbedder) -> None:
    vectors = embedder.embed(["", "the tavern"])
    assert not np.isnan(vectors).any()
    assert not vectors[0].any() and vectors[1].any()
    assert embedder.embed([]).shape == (0, 256)


def test_it_loads_and_embeds_with_no_network_and_an_empty_home(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    env = os.environ | {"HF_HUB_OFFLINE": "1", "HOME": str(home), "XDG_CACHE_HOME": str(home)}
    ran = subprocess.run(
        [sys.executable, "-c", NO_NETWORK], env=env, capture_output=True, text=True, timeout=120
    )
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip() == "256"
    assert list(home.iterdir()) == []
