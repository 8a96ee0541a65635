"""The full-text stage's query: plain words only, so any feedback text is a valid Lucene query."""

from kope.memory.retrieval import TEXT_TERMS, text_terms


def test_lucene_syntax_in_feedback_never_reaches_the_query():
    text = 'error: expected ")" before \'{\' token AND (foo:bar* OR "baz~2") -x +y [1 TO 5] \\\\ /regex/'
    query = text_terms(text)
    assert query == "error OR expected OR before OR token OR foo OR bar OR baz OR regex"
    assert not set(query) & set(':()"*~[]\\/+-{}^!?')


def test_repeated_short_and_stop_words_are_dropped_and_the_query_is_bounded():
    assert text_terms("the the of _mm512 AVX512 avx512 a to") == "mm512 OR avx512"
    many = " ".join(f"word{i}" for i in range(100))
    assert len(text_terms(many).split(" OR ")) == TEXT_TERMS
    assert text_terms("a b c 12 ::") is None
