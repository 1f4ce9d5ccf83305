"""leaseboard.domain.expressions: a condition that cannot be saved says what and where in
plain words (line and column, the offending token, a hint), never the parser's dump."""

from __future__ import annotations

import pytest

from leaseboard.domain.expressions import ExpressionError, compile_condition


def _message(source: str) -> str:
    with pytest.raises(ExpressionError) as caught:
        compile_condition(source)
    return str(caught.value)


@pytest.mark.parametrize(
    ("source", "said"),
    [
        (
            "payload.amount_cents >",
            "line 1, column 23: the condition ends too early after `payload.amount_cents >`: "
            "a value, a field or `(` should follow",
        ),
        (
            "payload.a > 1 &&& true",
            "line 1, column 17: `&` alone is not an operator; write `&&` for and, `||` for or",
        ),
        (
            "payload.payee == 'acme",
            "line 1, column 18: the string starting `'acme` is not closed; add its closing '",
        ),
        (
            "(payload.a > 1",
            "line 1, column 15: the condition ends after `(payload.a > 1` before its `)`; add it",
        ),
        ("payload.a in [1, 2", "before its `]`; add it"),
        ("payload.a >> 3", "line 1, column 12: `>>` is not an operator in CEL"),
        ("payload.a = 3", "line 1, column 11: `=` alone is not a comparison; write `==`"),
        ("payload.a > 1 and payload.b", "`and` is not an operator in CEL; write `&&`"),
        ("payload.a > 1 )", "line 1, column 15: `)` is not expected here after `payload.a > 1`"),
        ("1 > 0 ||\n  * 2", "line 2, column 3: `*` is not expected here"),
        ("foo(1)", "line 1, column 4: there is no function `foo`"),
        (
            "effect.kind + 1 > 0",
            "line 1, column 13: `+` cannot be applied to string and int; convert one side",
        ),
    ],
)
def test_a_syntax_or_type_error_says_where_and_what_in_words(source, said):
    message = _message(source)
    assert said in message
    for dump in ("Syntax error", "mismatched input", "<input>", "INVALID_ARGUMENT", "|", "^"):
        assert dump not in message.replace("`||`", ""), (dump, message)


def test_a_misspelt_variable_is_named_with_the_nearest_one():
    message = _message("effect.kindd == 'payment.refund'")
    assert message.startswith("line 1, column 7: unknown field 'effect.kindd'; ")
    assert "did you mean `effect.kind`?" in message
    assert "a condition may read: agent.name, effect.kind" in message


def test_a_name_like_no_variable_gets_no_guess():
    message = _message("zzzz > 1")
    assert "unknown field 'zzzz'" in message
    assert "did you mean" not in message
