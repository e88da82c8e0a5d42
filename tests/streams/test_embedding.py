"""The default embedder: offline, 256 numbers a text, and close for texts that mean the same."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import wordllama

from streams.embedding import WORDLLAMA_DIR, WordLlamaEmbedder

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


ODD_TEXTS = [
    "",
    " ",
    "a",
    " the tavern",
    "the tavern ",
    "Ilse  drew   her sword",
    "a ▁ mark",
    "▁lead",
    "Zoë's café\tnaïve\nline",
    "日本語 テキスト",
    "a 🐉 dragon 42",
    "x" * 300,
]
"""Texts whose words are not parted by single spaces, or that hold characters of their own."""


@pytest.fixture(scope="module")
def embedder() -> WordLlamaEmbedder:
    return WordLlamaEmbedder()


def wordllamas_own(texts: list[str]) -> np.ndarray:
    """WordLlama's own `embed` of the texts, scaled to unit length."""
    model = wordllama.WordLlama.load(
        config="l2_supercat", dim=256, cache_dir=WORDLLAMA_DIR, disable_download=True
    )
    pooled = model.embed(texts, norm=False)
    lengths = np.linalg.norm(pooled, axis=1, keepdims=True)
    unit: np.ndarray = np.divide(pooled, lengths, out=np.zeros_like(pooled), where=lengths > 0)
    return unit


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


def test_the_vectors_are_wordllamas_own_for_plain_and_odd_texts() -> None:
    plain = [text for pair in PARAPHRASES for text in pair] + [UNRELATED]
    plain += [f"The miller's son went missing near the river {day} days ago" for day in range(40)]
    texts = plain + ODD_TEXTS
    made = WordLlamaEmbedder().embed(texts)
    np.testing.assert_allclose(made, wordllamas_own(texts), rtol=0, atol=1e-6)


def test_forgetting_the_kept_words_changes_no_vector(
    embedder: WordLlamaEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    texts = [f"the {word} at the tavern" for word in ("bard", "baker", "ferryman", "hunter")]
    expected = embedder.embed(texts)
    forgetful = WordLlamaEmbedder()
    monkeypatch.setattr(forgetful, "PIECES_KEPT", 6)
    made = [forgetful.embed(texts[number : number + 2]) for number in (0, 1, 2)]
    assert np.array_equal(np.vstack([made[0], made[2]]), expected)
    assert np.array_equal(made[1], expected[1:3])


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
