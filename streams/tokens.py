"""Token counts for the chronicle (section 14): WordLlama's own tokenizer, read from the wheel.

The WordLlama wheel the default embedder runs from (`streams.embedding`) ships its tokenizer as
a `tokenizers` JSON file in its `tokenizers/` folder; it is loaded from there, so nothing is
ever downloaded. Counts are memoised by text: a chronicle read counts every record's digest and
statement, and the same records are read again and again.
"""

from __future__ import annotations

from functools import cache, lru_cache

from tokenizers import Tokenizer

from projections.chronicle_summaries import TokenCounter
from streams.embedding import WordLlamaEmbedder

TOKENIZER_FILE = WordLlamaEmbedder.TOKENIZER_FILE
COUNTS_KEPT = 1 << 17


@cache
def wordllama_tokens() -> TokenCounter:
    """The number of WordLlama tokens of a text (no special tokens), loaded once."""
    tokenizer = Tokenizer.from_file(str(TOKENIZER_FILE))

    @lru_cache(maxsize=COUNTS_KEPT)
    def count(text: str) -> int:
        return len(tokenizer.encode(text, add_special_tokens=False).ids)

    return count
