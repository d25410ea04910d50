"""The invariant every parser's result keeps, shared by the fuzz tests of agent text and of chat responses."""

from arew.chat import ParseResult


def check(result, shape=None):
    """``result`` is a ParseResult: a value that passes ``shape``, or no value and a non-empty reason."""
    assert isinstance(result, ParseResult) and result.ok == (result.error is None)
    if result.ok:
        if shape:
            shape(result.value)
    else:
        assert isinstance(result.error, str) and result.error and result.value is None
