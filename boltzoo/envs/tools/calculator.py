"""A safe calculator that agents call with ``<calc>EXPRESSION</calc>`` tags (Calc-X style).

The agent writes ``<calc>200*15%</calc>`` in its text; the env finds the calls with
:func:`find_calls`, runs each through :func:`evaluate` and shows the agent ``CalcResult.output``
(``"30"``, or ``"error: division by zero"``). :func:`evaluate` never raises on a ``str``.

Nothing here uses ``eval``, ``exec``, ``compile`` or ``ast``: a tokenizer, a recursive-descent
parser and a tree evaluator, each with explicit limits, so hostile or broken input gives an error
message quickly instead of running code, hanging, or crashing the parser.

Grammar (lowest precedence first; function names are case-insensitive)::

    expression := term (("+" | "-") term)*
    term       := unary (("*" | "/" | "//") unary)*
    unary      := ("+" | "-") unary | power
    power      := postfix ("**" unary)?          # right-assoc; "^" means "**"; -2**2 == -4
    postfix    := primary "%"?                   # percent: 15% == 0.15, 50 + 10% == 50.1
    primary    := NUMBER | "(" expression ")" | NAME "(" expression ("," expression)* ")"
    NUMBER     := digits ["." digits] [("e"|"E") ["+"|"-"] digits]   (also ".5", "1,200")
    NAME       := sqrt | round | min | max | abs | mod | floor | ceil

Commas: ``1,200`` and ``12,345,678`` are thousands separators (a 1-3 digit group not starting
with 0, then groups of exactly three digits) except directly inside the parentheses of a
function that takes several arguments (``min``, ``max``, ``round``, ``mod``), where a comma
always separates arguments: ``max(1,200)`` is 200. Modulo is ``mod(a, b)``; ``round`` rounds
halves away from zero, like a pocket calculator (``round(2.5)`` is 3).

Arithmetic is exact with :class:`~fractions.Fraction` (``0.1+0.2`` is exactly 0.3) for
``+ - * / //``, integer powers and square roots of perfect squares; ``sqrt`` of anything else
and non-integer powers use floats, and a float stays a float from there on.

Limits, each reported as an error message rather than a hang or a crash:

* the expression is at most ``max_length`` characters (500) and not empty;
* nesting (parentheses, function calls, unary signs, exponents) is at most 50 deep;
* a number literal has at most 30 digits and an exponent of at most 300;
* every intermediate result has ``abs() <= 1e100`` and a denominator of at most 200 digits;
* powers are sized *before* being computed: integer exponents above 10,000 in absolute value, or
  results estimated above 1e100, are refused, so ``9**9**9**9`` returns at once;
* the evaluation stops after ``time_limit_s`` seconds (0.5) of wall-clock time.

Only the standard library is used.
"""

from __future__ import annotations

import decimal
import math
import re
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from fractions import Fraction

from boltzoo.envs.protocol import tagged_calls

__all__ = [
    "CALC_PATTERN",
    "CalcResult",
    "CalculatorError",
    "calculate",
    "evaluate",
    "find_calls",
    "format_number",
    "has_unclosed_call",
]

Number = Fraction | float

MAX_DEPTH = 50
MAX_LITERAL_DIGITS = 30
MAX_LITERAL_EXPONENT = 300
MAX_MAGNITUDE = 10**100
MAX_DENOMINATOR = 10**200  # denominators of 201+ digits are "too precise"
MAX_INTEGER_EXPONENT = 10_000
MAX_ROUND_DIGITS = 100
SIGNIFICANT_DIGITS = 10
DISPLAY_LIMIT = 200  # characters of the expression kept in CalcResult.expression

CALC_PATTERN: re.Pattern[str] = re.compile(r"<calc>(.*?)</calc>", re.DOTALL)

_OPEN_TAG = "<calc>"
_CLOSE_TAG = "</calc>"
_DIGITS = frozenset("0123456789")
_LETTERS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
_SINGLE_CHAR_OPERATORS = frozenset("+-*/%(),")


# --- Finding calls in agent text --------------------------------------------------------------


def find_calls(text: str) -> list[str]:
    """Return the expression inside every ``<calc>...</calc>`` of ``text``, in order, stripped.

    Args:
        text (str): agent output; tags may span lines.

    Returns:
        list[str]: one (possibly empty) expression per closed tag pair; ``[]`` when there is none.
    """
    return [content for _, _, content in tagged_calls(text, "calc")]


def has_unclosed_call(text: str) -> bool:
    """Tell whether a ``<calc>`` in ``text`` has no ``</calc>`` after it.

    That is what a generation stopped on the ``</calc>`` stop sequence looks like: the env then
    closes the tag itself and appends the result.

    Args:
        text (str): agent output.

    Returns:
        bool: True when the last ``<calc>`` is not followed by a ``</calc>``.
    """
    # If the last opening tag is closed, every earlier one is closed too.
    last_open = text.rfind(_OPEN_TAG)
    return last_open != -1 and text.find(_CLOSE_TAG, last_open + len(_OPEN_TAG)) == -1


# --- Public results and errors -----------------------------------------------------------------


class CalculatorError(ValueError):
    """An expression the calculator refuses; the message is short and meant for the agent."""


@dataclass(frozen=True)
class CalcResult:
    """The outcome of one calculator call.

    Attributes:
        expression (str): the expression as given, cut to 200 characters plus ``"..."`` if longer.
        ok (bool): whether the expression was evaluated.
        output (str): the formatted value when ``ok`` (``"0.3"``), else ``"error: <reason>"``.
        value (float | None): the numeric value when ``ok``, else None.
    """

    expression: str
    ok: bool
    output: str
    value: float | None


def evaluate(expression: str, *, max_length: int = 500, time_limit_s: float = 0.5) -> CalcResult:
    """Evaluate one calculator expression; never raises on any ``str``.

    Args:
        expression (str): e.g. ``"2 + 3*4"`` or ``"round(10/3, 2)"``.
        max_length (int): longest expression accepted, in characters.
        time_limit_s (float): wall-clock budget for parsing and evaluating.

    Returns:
        CalcResult: ``ok=True`` with the formatted value, or ``ok=False`` with an ``"error: "``
        message that tells the agent what to fix.
    """
    if not isinstance(expression, str):
        return CalcResult("", False, "error: expression must be a string", None)
    shown = expression if len(expression) <= DISPLAY_LIMIT else expression[:DISPLAY_LIMIT] + "..."
    try:
        value = calculate(expression, max_length=max_length, time_limit_s=time_limit_s)
        return CalcResult(shown, True, format_number(value), float(value))
    except CalculatorError as error:
        return CalcResult(shown, False, f"error: {error}", None)
    except Exception as error:  # a bug of ours must still not crash the env
        message = f"error: could not evaluate expression ({type(error).__name__})"
        return CalcResult(shown, False, message, None)


def calculate(expression: str, *, max_length: int = 500, time_limit_s: float = 0.5) -> Number:
    """Evaluate ``expression`` and return its exact (``Fraction``) or approximate (``float``) value.

    Args:
        expression (str): the expression, in the grammar of this module's docstring.
        max_length (int): longest expression accepted, in characters.
        time_limit_s (float): wall-clock budget for parsing and evaluating.

    Returns:
        Fraction | float: a Fraction unless a float operation (``sqrt``, a non-integer power)
        was involved.

    Raises:
        CalculatorError: for every expression it refuses, with a message for the agent.
    """
    if not isinstance(expression, str):
        raise CalculatorError("expression must be a string")
    if len(expression) > max_length:
        raise CalculatorError(f"expression too long ({len(expression)} chars, limit {max_length})")
    if not expression.strip():
        raise CalculatorError("empty expression")
    # Parentheses deeper than the limit are refused before any token is made: a long hostile
    # input then costs a scan of its characters, not a parse that a garbage collection in the
    # middle could push past the time limit.
    depth = 0
    for char in expression:
        depth += (char == "(") - (char == ")")
        if depth > MAX_DEPTH:
            raise CalculatorError(f"expression too deeply nested (limit {MAX_DEPTH})")
    deadline = _Deadline(time_limit_s)
    # The limits should make these impossible; they are turned into messages just in case.
    try:
        tree = _Parser(_tokenize(expression), deadline).parse()
        return _evaluate(tree, deadline)
    except RecursionError:
        raise CalculatorError(f"expression too deeply nested (limit {MAX_DEPTH})") from None
    except MemoryError:
        raise CalculatorError("calculation needs too much memory") from None
    except OverflowError:
        raise CalculatorError("result too large") from None
    except ZeroDivisionError:
        raise CalculatorError("division by zero") from None


class _Deadline:
    """Wall-clock budget, checked once per token parsed and per operation evaluated."""

    def __init__(self, seconds: float) -> None:
        self._end = time.monotonic() + seconds

    def check(self) -> None:
        """Raise CalculatorError when the budget is spent."""
        if time.monotonic() >= self._end:
            raise CalculatorError("calculation took too long")


# --- Tokenizer ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Token:
    """One token: kind is "number", "name", "op" or "end"; position is 0-based."""

    kind: str
    text: str
    position: int
    value: Fraction | None = None  # numbers only

    def describe(self) -> str:
        """Name the token for an error message, e.g. ``"')' at position 4"``."""
        if self.kind == "end":
            return "end of expression"
        prefix = "number " if self.kind == "number" else ""
        return f"{prefix}'{self.text}' at position {self.position + 1}"


def _tokenize(text: str) -> list[_Token]:
    """Split ``text`` into tokens, ending with an "end" token.

    Raises:
        CalculatorError: on a character outside the grammar, an unknown name, or a bad number.
    """
    tokens: list[_Token] = []
    # One entry per open parenthesis: True when it opens the argument list of a function taking
    # several arguments, where a comma separates arguments instead of grouping thousands.
    in_argument_list: list[bool] = []
    position = 0
    while position < len(text):
        char = text[position]
        if char.isspace():
            position += 1
        elif char in _DIGITS or (char == "." and text[position + 1 : position + 2] in _DIGITS):
            thousands = not (in_argument_list and in_argument_list[-1])
            token = _read_number(text, position, thousands_separators=thousands)
            tokens.append(token)
            position += len(token.text)
        elif char in _LETTERS:
            end = position
            while end < len(text) and text[end] in _LETTERS:
                end += 1
            name = text[position:end].lower()
            if name not in _FUNCTIONS:
                known = ", ".join(sorted(_FUNCTIONS))
                raise CalculatorError(f"unknown name '{text[position:end]}' (functions: {known})")
            tokens.append(_Token("name", name, position))
            position = end
        elif text.startswith(("**", "//"), position):
            tokens.append(_Token("op", text[position : position + 2], position))
            position += 2
        elif char == "^":  # LLMs write ^ for powers
            tokens.append(_Token("op", "**", position))
            position += 1
        elif char in _SINGLE_CHAR_OPERATORS:
            if char == "(":
                after_name = bool(tokens) and tokens[-1].kind == "name"
                in_argument_list.append(after_name and _FUNCTIONS[tokens[-1].text].max_args != 1)
            elif char == ")" and in_argument_list:
                in_argument_list.pop()
            tokens.append(_Token("op", char, position))
            position += 1
        else:
            raise CalculatorError(f"unexpected character {char!r} at position {position + 1}")
    tokens.append(_Token("end", "", len(text)))
    return tokens


def _read_number(text: str, start: int, *, thousands_separators: bool) -> _Token:
    """Read the number literal starting at ``text[start]`` into an exact Fraction token."""
    position = _skip_digits(text, start)
    integer_digits = text[start:position]
    if thousands_separators and 1 <= len(integer_digits) <= 3 and integer_digits[0] != "0":
        while _is_thousands_group(text, position):
            integer_digits += text[position + 1 : position + 4]
            position += 4
    fraction_digits = ""
    if text[position : position + 1] == ".":
        end = _skip_digits(text, position + 1)
        fraction_digits = text[position + 1 : end]
        position = end
    exponent = 0
    if text[position : position + 1] in ("e", "E"):
        sign_end = position + 2 if text[position + 1 : position + 2] in ("+", "-") else position + 1
        exponent_end = _skip_digits(text, sign_end)
        if exponent_end > sign_end:  # otherwise the "e" is not part of the number
            exponent_digits = text[sign_end:exponent_end].lstrip("0") or "0"
            # Check the length before int(): a 5000-digit exponent must not be parsed.
            if len(exponent_digits) > 3 or int(exponent_digits) > MAX_LITERAL_EXPONENT:
                raise CalculatorError(f"number out of range: '{text[start:exponent_end]}'")
            exponent = int(exponent_digits) * (-1 if text[sign_end - 1] == "-" else 1)
            position = exponent_end
    literal = text[start:position]
    if len(integer_digits) + len(fraction_digits) > MAX_LITERAL_DIGITS:
        raise CalculatorError(f"number too long (more than {MAX_LITERAL_DIGITS} digits)")
    mantissa = int(integer_digits + fraction_digits or "0")
    scale = exponent - len(fraction_digits)  # value = mantissa * 10**scale
    numerator = mantissa * 10**scale if scale > 0 else mantissa
    denominator = 10**-scale if scale < 0 else 1
    if numerator > MAX_MAGNITUDE * denominator:
        raise CalculatorError(f"number too large: '{literal}'")
    value = Fraction(numerator, denominator)
    if value.denominator > MAX_DENOMINATOR:
        raise CalculatorError(f"number too small: '{literal}'")
    return _Token("number", literal, start, value)


def _skip_digits(text: str, position: int) -> int:
    """Return the index just past the run of ASCII digits starting at ``position``."""
    while position < len(text) and text[position] in _DIGITS:
        position += 1
    return position


def _is_thousands_group(text: str, position: int) -> bool:
    """Tell whether ``text[position:]`` starts with "," and exactly three digits."""
    group = text[position + 1 : position + 4]
    return (
        text[position : position + 1] == ","
        and len(group) == 3
        and all(char in _DIGITS for char in group)
        and text[position + 4 : position + 5] not in _DIGITS
    )


# --- Parser: tokens -> tree ---------------------------------------------------------------------


@dataclass(frozen=True)
class _Literal:
    value: Fraction


@dataclass(frozen=True)
class _Chain:
    """A left-associative run like ``a + b - c``: kept flat so long sums need no recursion."""

    first: _Node
    rest: tuple[tuple[str, _Node], ...]


@dataclass(frozen=True)
class _Negate:
    operand: _Node


@dataclass(frozen=True)
class _Power:
    base: _Node
    exponent: _Node


@dataclass(frozen=True)
class _Percent:
    operand: _Node


@dataclass(frozen=True)
class _Call:
    name: str
    arguments: tuple[_Node, ...]


_Node = _Literal | _Chain | _Negate | _Power | _Percent | _Call


class _Parser:
    """Recursive descent over the grammar in the module docstring, with a nesting limit."""

    def __init__(self, tokens: list[_Token], deadline: _Deadline) -> None:
        self._tokens = tokens
        self._index = 0
        self._depth = 0
        self._deadline = deadline

    def parse(self) -> _Node:
        """Parse the whole token list into a tree."""
        tree = self._expression()
        if self._peek().kind != "end":
            raise CalculatorError(f"unexpected {self._peek().describe()}")
        return tree

    # Token helpers.

    def _peek(self) -> _Token:
        return self._tokens[self._index]

    def _at(self, *operators: str) -> bool:
        token = self._peek()
        return token.kind == "op" and token.text in operators

    def _advance(self) -> _Token:
        self._deadline.check()
        token = self._tokens[self._index]
        if token.kind != "end":
            self._index += 1
        return token

    def _expect_close(self, what: str) -> None:
        if self._at(")"):
            self._advance()
        elif self._peek().kind == "end":
            raise CalculatorError(f"missing ')' to close {what}")
        else:
            raise CalculatorError(f"expected ')' to close {what}, found {self._peek().describe()}")

    @contextmanager
    def _nested(self) -> Iterator[None]:
        """Count one level of nesting; the limit keeps Python's recursion far from its own."""
        self._depth += 1
        if self._depth > MAX_DEPTH:
            raise CalculatorError(f"expression too deeply nested (limit {MAX_DEPTH})")
        try:
            yield
        finally:
            self._depth -= 1

    # Grammar rules, lowest precedence first.

    def _expression(self) -> _Node:
        return self._chain(self._term, ("+", "-"))

    def _term(self) -> _Node:
        return self._chain(self._unary, ("*", "/", "//"))

    def _chain(self, operand: Callable[[], _Node], operators: tuple[str, ...]) -> _Node:
        first = operand()
        rest: list[tuple[str, _Node]] = []
        while self._at(*operators):
            operator = self._advance().text
            rest.append((operator, operand()))
        return _Chain(first, tuple(rest)) if rest else first

    def _unary(self) -> _Node:
        if self._at("+", "-"):
            sign = self._advance().text
            with self._nested():
                operand = self._unary()
            return _Negate(operand) if sign == "-" else operand
        return self._power()

    def _power(self) -> _Node:
        base = self._postfix()
        if not self._at("**"):
            return base
        self._advance()
        # The exponent is a unary, so 2**-1 works and 2**3**2 groups as 2**(3**2).
        with self._nested():
            exponent = self._unary()
        return _Power(base, exponent)

    def _postfix(self) -> _Node:
        operand = self._primary()
        if self._at("%"):
            self._advance()
            return _Percent(operand)
        return operand

    def _primary(self) -> _Node:
        token = self._advance()
        if token.kind == "number":
            assert token.value is not None
            return _Literal(token.value)
        if token.kind == "op" and token.text == "(":
            with self._nested():
                inner = self._expression()
            self._expect_close(f"'(' at position {token.position + 1}")
            return inner
        if token.kind == "name":
            return self._call(token)
        if token.kind == "end":
            raise CalculatorError(
                "unexpected end of expression (expected a number, a function or '(')"
            )
        raise CalculatorError(f"unexpected {token.describe()}")

    def _call(self, name_token: _Token) -> _Call:
        name = name_token.text
        if not self._at("("):
            raise CalculatorError(f"expected '(' after '{name}'")
        self._advance()
        arguments: list[_Node] = []
        with self._nested():
            if not self._at(")"):
                arguments.append(self._expression())
                while self._at(","):
                    self._advance()
                    arguments.append(self._expression())
        self._expect_close(f"the arguments of '{name}'")
        _FUNCTIONS[name].check_arity(name, len(arguments))
        return _Call(name, tuple(arguments))


# --- Evaluator: tree -> value -------------------------------------------------------------------


def _evaluate(node: _Node, deadline: _Deadline) -> Number:
    """Evaluate a parsed tree, checking every intermediate result and the deadline."""
    deadline.check()
    match node:
        case _Literal(value):
            return value
        case _Chain(first, rest):
            result = _evaluate(first, deadline)
            for operator, operand in rest:
                deadline.check()
                result = _binary(operator, result, _evaluate(operand, deadline))
            return result
        case _Negate(operand):
            return -_evaluate(operand, deadline)
        case _Power(base, exponent):
            return _power(_evaluate(base, deadline), _evaluate(exponent, deadline))
        case _Percent(operand):
            return _checked(_evaluate(operand, deadline) / 100)
        case _Call(name, arguments):
            values = [_evaluate(argument, deadline) for argument in arguments]
            return _checked(_FUNCTIONS[name].apply(*values))
    raise AssertionError(f"unknown node {node!r}")  # unreachable: the parser builds only these


def _checked(value: Number) -> Number:
    """Return ``value`` if it is within the limits, else raise CalculatorError."""
    if isinstance(value, float):
        if math.isnan(value):
            raise CalculatorError("math domain error")
        if math.isinf(value) or abs(value) > MAX_MAGNITUDE:
            raise CalculatorError("result too large")
        return value
    if abs(value) > MAX_MAGNITUDE:
        raise CalculatorError("result too large")
    if value.denominator > MAX_DENOMINATOR:
        raise CalculatorError("number too precise (denominator over 200 digits)")
    return value


def _binary(operator: str, left: Number, right: Number) -> Number:
    """Apply ``+ - * / //`` exactly (Fractions) or approximately (when a float is involved)."""
    if operator == "+":
        return _checked(left + right)
    if operator == "-":
        return _checked(left - right)
    if operator == "*":
        return _checked(left * right)
    if right == 0:
        raise CalculatorError("division by zero")
    if operator == "/":
        return _checked(left / right)
    quotient = left // right  # an int for Fractions, a float when a float is involved
    return _checked(quotient if isinstance(quotient, float) else Fraction(quotient))


def _as_integer(value: Number) -> int | None:
    """Return ``value`` as an int when it is a whole number, else None."""
    if isinstance(value, float):
        return int(value) if value.is_integer() else None
    return value.numerator if value.denominator == 1 else None


def _log10_abs(value: Number) -> float:
    """log10(|value|) for a nonzero value, without converting a huge Fraction to float."""
    if isinstance(value, float):
        return math.log10(abs(value))
    return math.log10(abs(value.numerator)) - math.log10(value.denominator)


def _power(base: Number, exponent: Number) -> Number:
    """``base ** exponent``, sized before it is computed so huge powers fail at once."""
    whole_exponent = _as_integer(exponent)
    if whole_exponent is None:
        return _fractional_power(base, exponent)
    if whole_exponent == 0:
        return Fraction(1)  # 0**0 == 1, as in Python
    if base == 0:
        if whole_exponent < 0:
            raise CalculatorError("division by zero")
        return base
    if abs(base) == 1:
        return base ** (whole_exponent % 2)  # ±1 to any power, without computing it
    if whole_exponent * _log10_abs(base) > math.log10(MAX_MAGNITUDE):
        raise CalculatorError("result too large")
    if abs(whole_exponent) > MAX_INTEGER_EXPONENT:
        raise CalculatorError(f"exponent too large (limit {MAX_INTEGER_EXPONENT})")
    if isinstance(base, Fraction):
        # Numerator and denominator are each raised to the power: refuse before they grow huge.
        widest_digits = math.log10(max(abs(base.numerator), base.denominator))
        if abs(whole_exponent) * widest_digits > math.log10(MAX_DENOMINATOR):
            raise CalculatorError("number too precise (denominator over 200 digits)")
    return _checked(base**whole_exponent)


def _fractional_power(base: Number, exponent: Number) -> float:
    """``base ** exponent`` for a non-integer exponent, in floats."""
    if base < 0:
        raise CalculatorError("math domain error: negative number to a fractional power")
    if base == 0:
        if exponent < 0:
            raise CalculatorError("division by zero")
        return 0.0
    try:
        result = float(base) ** float(exponent)
    except OverflowError:
        raise CalculatorError("result too large") from None
    return float(_checked(result))


# --- Functions ----------------------------------------------------------------------------------


def _sqrt(value: Number) -> Number:
    """Square root: exact for squares of Fractions (``sqrt(16)`` is 4), else a float."""
    if value < 0:
        raise CalculatorError("math domain error: square root of a negative number")
    if isinstance(value, Fraction):
        root_numerator = math.isqrt(value.numerator)
        root_denominator = math.isqrt(value.denominator)
        if root_numerator**2 == value.numerator and root_denominator**2 == value.denominator:
            return Fraction(root_numerator, root_denominator)
    return math.sqrt(value)


def _round(value: Number, digits: Number = Fraction(0)) -> Fraction:
    """Round to ``digits`` decimals, halves away from zero (``round(2.5)`` is 3)."""
    places = _as_integer(digits)
    if places is None:
        raise CalculatorError("round: the number of digits must be a whole number")
    if abs(places) > MAX_ROUND_DIGITS:
        raise CalculatorError(f"round: at most {MAX_ROUND_DIGITS} digits")
    exact = Fraction(value)  # a float is converted exactly
    scale = Fraction(10) ** places
    rounded = math.floor(abs(exact) * scale + Fraction(1, 2)) / scale
    return rounded if exact >= 0 else -rounded


def _mod(dividend: Number, divisor: Number) -> Number:
    """``dividend mod divisor``, with the sign of the divisor (as Python's ``%``)."""
    if divisor == 0:
        raise CalculatorError("division by zero")
    return dividend % divisor


@dataclass(frozen=True)
class _Function:
    """A callable function: how many arguments it takes and what it does."""

    min_args: int
    max_args: int | None  # None: any number
    apply: Callable[..., Number]

    def check_arity(self, name: str, count: int) -> None:
        """Raise CalculatorError when ``count`` arguments do not fit."""
        if self.min_args <= count and (self.max_args is None or count <= self.max_args):
            return
        if self.max_args is None:
            expected = f"at least {self.min_args}"
        elif self.min_args == self.max_args:
            expected = str(self.min_args)
        else:
            expected = f"{self.min_args} or {self.max_args}"
        plural = "" if expected.endswith(" 1") or expected == "1" else "s"
        raise CalculatorError(f"{name}() takes {expected} argument{plural} (got {count})")


_FUNCTIONS: dict[str, _Function] = {
    "abs": _Function(1, 1, abs),
    "ceil": _Function(1, 1, lambda value: Fraction(math.ceil(value))),
    "floor": _Function(1, 1, lambda value: Fraction(math.floor(value))),
    "max": _Function(1, None, lambda *values: max(values)),
    "min": _Function(1, None, lambda *values: min(values)),
    "mod": _Function(2, 2, _mod),
    "round": _Function(1, 2, _round),
    "sqrt": _Function(1, 1, _sqrt),
}


# --- Output formatting --------------------------------------------------------------------------


def format_number(x: Fraction | float) -> str:
    """Format a value for the agent; never shows a Fraction repr.

    Whole numbers print as integers (``40``, ``-3``); others as a decimal rounded (halves up) to
    10 significant digits, or to all their integer digits when there are more, with trailing zeros
    stripped (``0.3``, ``3.333333333``); magnitudes from 1e16 up or below 1e-6 in ``e`` notation
    with 10 significant digits (``1.23456789e+20``).

    Args:
        x (Fraction | float): the value (an int works too).

    Returns:
        str: the formatted number.
    """
    if isinstance(x, float) and not math.isfinite(x):
        return str(x)  # calculate() never returns these
    exact = Fraction(x)
    magnitude = abs(exact)
    if magnitude == 0:
        return "0"
    if magnitude >= 10**16 or magnitude < Fraction(1, 10**6):
        mantissa, exponent = format(_round_significant(exact, SIGNIFICANT_DIGITS), ".9e").split("e")
        return f"{_strip_zeros(mantissa)}e{exponent}"
    if exact.denominator == 1:
        return str(exact.numerator)
    # 12345678901.5 keeps its integer digits rather than becoming 12345678900.
    integer_digits = len(str(math.floor(magnitude)))
    rounded = _round_significant(exact, max(SIGNIFICANT_DIGITS, integer_digits))
    return _strip_zeros(format(rounded, "f"))


def _round_significant(value: Fraction, digits: int) -> decimal.Decimal:
    """``value`` as a Decimal rounded half-up to ``digits`` significant digits."""
    with decimal.localcontext() as context:
        context.prec = digits
        context.rounding = decimal.ROUND_HALF_UP
        # Decimal(int) is exact; the division rounds correctly to the context's precision.
        return decimal.Decimal(value.numerator) / decimal.Decimal(value.denominator)


def _strip_zeros(text: str) -> str:
    """Drop trailing zeros after a decimal point, and the point itself if nothing follows."""
    return text.rstrip("0").rstrip(".") if "." in text else text
