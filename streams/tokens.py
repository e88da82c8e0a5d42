"""Token counts for the chronicle (section 14): WordLlama's own tokenizer, read from the wheel.

The WordLlama wheel the default embedder runs from (`streams.embedding`) ships its tokenizer as
a `tokenizers` JSON file in its `tokenizers/` folder; it is loaded from there, so nothing is
ever downloaded. Counts are memoised by the text's hash, not the text: a chronicle read counts
every record's digest and statement, and the same records are read again and again; kept by
their words, the counts of a worker's chronicles held every summary counted, whole.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from functools import cache

from tokenizers import Tokenizer

from projections.chronicle_summaries import TokenCounter
from streams.embedding import WordLlamaEmbedder

TOKENIZER_FILE = WordLlamaEmbedder.TOKENIZER_FILE
COUNTS_KEPT = 1 << 17


@cache
def wordllama_tokens() -> TokenCounter:
    """The number of WordLlama tokens of a text (no special tokens), loaded once; the counts of
    the `COUNTS_KEPT` texts counted last are kept (reads count on their own thread too)."""
    tokenizer = Tokenizer.from_file(str(TOKENIZER_FILE))
    counts: OrderedDict[bytes, int] = OrderedDict()
    lock = threading.Lock()

    def count(text: str) -> int:
        key = hashlib.blake2b(text.encode(), digest_size=16).digest()
        with lock:
            kept = counts.get(key)
            if kept is not None:
                counts.move_to_end(key)
                return kept
        counted = len(tokenizer.encode(text, add_special_tokens=False).ids)
        with lock:
            counts[key] = counted
            if len(counts) > COUNTS_KEPT:
                counts.popitem(last=False)
        return counted

    return count
