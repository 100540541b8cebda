"""The default suite's text (:mod:`model_text`) is what the tests of a real model need: the
model's own word sequences, with words it lacks now and then, the same on every run."""

from __future__ import annotations

from conftest import demo_model, demo_sentences
from exhaustive import ArpaModel
from model_text import UNKNOWN_SHARE, sampled_sentences


def test_the_demo_text_follows_the_models_ngrams_with_some_unknown_words() -> None:
    """Most neighbouring words of the text are bigrams of the model, and trigrams are many
    (its patterns get read); about UNKNOWN_SHARE of the tokens are words it lacks."""
    model = demo_model()
    sentences = [line.split() for line in demo_sentences(300)]
    known = [[model.map_word(word) == word for word in tokens] for tokens in sentences]
    tokens = sum(map(len, sentences))
    unknown = sum(flags.count(False) for flags in known)
    assert 0.5 * UNKNOWN_SHARE < unknown / tokens < 2 * UNKNOWN_SHARE
    pairs = [tuple(s[i:i + 2]) for s in sentences for i in range(len(s) - 1)]
    triples = [tuple(s[i:i + 3]) for s in sentences for i in range(len(s) - 2)]
    assert sum(pair in model.ngrams for pair in pairs) > 0.6 * len(pairs)
    assert sum(triple in model.ngrams for triple in triples) > 0.25 * len(triples)
    assert all(tokens and len(tokens) <= 30 for tokens in sentences)


def test_the_same_model_and_seed_give_the_same_sentences() -> None:
    model = ArpaModel.from_text("\\data\\\nngram 1=4\nngram 2=3\n\n\\1-grams:\n-99\t<s>\t-0.5\n-0.5\t</s>\n"
                                "-0.6\ta\t-0.3\n-0.7\tb\t-0.2\n\n\\2-grams:\n-0.1\t<s> a\n-0.2\ta b\n-0.1\tb </s>\n"
                                "\n\\end\\\n")
    first = sampled_sentences(model, 50, seed=3)
    assert sampled_sentences(model, 50, seed=3) == first
    assert sampled_sentences(model, 50, seed=4) != first
    assert {word for line in first for word in line.split()} - {"a", "b"} <= {
        word for line in first for word in line.split() if word.startswith("unseen")}
