"""The Korean layer's tokenizer: one token per Hangul syllable, a run of Latin letters or digits
as one token, any other character as one token, single spaces as spaCy's trailing spaces and
other whitespace as tokens of their own.

Why syllables: spaCy's own Korean tokenizer needs mecab, which flywheel does not install, and a
name always starts and ends on a syllable boundary, glued particle or not (``김민수님``,
``민준이가``), so every name is a span of whole tokens; a morphological tokenizer (kiwipiepy)
splits unknown names at its own guesses, the very words the layer is for, and its tokens can
overlap. What the syllable loses, where words start and end, goes into each token's ``NORM``
(which the NER's embedding reads): ``▁`` before a syllable that starts a word and after one that
ends it. Registered with spaCy as ``flywheel.ko_syllables.v1``; a pipeline saved with it loads
where this module has been imported.
"""

from __future__ import annotations

from typing import Any

import regex as re
import spacy
from spacy.tokens import Doc

NAME = "flywheel.ko_syllables.v1"
MARK = "▁"
_PIECE = re.compile(r"[\p{Hangul}]|[\p{Latin}\d]+|[ ]|\s+|.", re.DOTALL)
_HANGUL = re.compile(r"[\p{Hangul}]")


class SyllableTokenizer:
    """The tokenizer (nothing to save: the rules are this code)."""

    def __init__(self, vocab: Any) -> None:
        self.vocab = vocab

    def __call__(self, text: str) -> Doc:
        words: list[str] = []
        spaces: list[bool] = []
        for m in _PIECE.finditer(text):
            piece = m.group()
            if piece == " " and words and not spaces[-1] and not words[-1].isspace():
                spaces[-1] = True
            else:
                words.append(piece)
                spaces.append(False)
        doc = Doc(self.vocab, words=words, spaces=spaces)
        for i, token in enumerate(doc):
            if not _HANGUL.match(token.text):
                continue
            starts = i == 0 or doc[i - 1].whitespace_ != "" or not _HANGUL.match(doc[i - 1].text)
            ends = (
                token.whitespace_ != "" or i + 1 == len(doc) or not _HANGUL.match(doc[i + 1].text)
            )
            token.norm_ = (MARK if starts else "") + token.text + (MARK if ends else "")
        return doc

    def pipe(self, texts: Any, batch_size: int = 1000) -> Any:
        """Tokenize each of ``texts`` in turn (spaCy's tokenizer protocol)."""
        del batch_size  # one text at a time: nothing to batch
        for text in texts:
            yield self(text)

    def to_bytes(self, **_kwargs: Any) -> bytes:
        """Nothing to save: the tokenizer has no state (spaCy's serialisation protocol)."""
        return b""

    def from_bytes(self, _data: bytes, **_kwargs: Any) -> SyllableTokenizer:
        """Itself: there is no state to load."""
        return self

    def to_disk(self, _path: Any, **_kwargs: Any) -> None:
        """Nothing to write: the tokenizer has no state."""
        return None

    def from_disk(self, _path: Any, **_kwargs: Any) -> SyllableTokenizer:
        """Itself: there is no state to read."""
        return self


@spacy.registry.tokenizers(NAME)
def create_tokenizer() -> Any:
    """spaCy's factory for :class:`SyllableTokenizer`."""

    def make(nlp: Any) -> SyllableTokenizer:
        return SyllableTokenizer(nlp.vocab)

    return make


def blank() -> Any:
    """An empty Korean pipeline with this tokenizer."""
    return spacy.blank("ko", config={"nlp": {"tokenizer": {"@tokenizers": NAME}}})
