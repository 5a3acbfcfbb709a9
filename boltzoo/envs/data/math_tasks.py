"""Math word problems for math-v0: seeded generators (GSM8K / Calc-X files: ``loaders``).

Every task carries an exact gold ``answer`` (canonical numeric string) and, where known, one
calculator ``expression`` (only ``+ - * / ( )`` and integers/decimals) that evaluates to it
exactly. Generated tasks are checked against that invariant as they are built.

Templates (each a different story shape, with several phrasings and name/item pools):

easy   (1-2 operations, every number two-digit 10-99, non-negative integer answers)
    shopping_change, sharing_equally, collection_growth, giving_away, production_rate,
    ages, rectangle_area, weekly_savings, compare_difference, bus_passengers
medium (2-3 operations, numbers up to 500, integer answers; round percentages, even divisions)
    shopping_change, sale_discount, sharing_after_eating, two_leg_trip, ages_multiple,
    savings_goal, recipe_scaling, fencing_cost, workers_wages, giving_fraction,
    unit_price_comparison
hard   (3-5 operations; percentages, fractions of quantities, multi-step rates; answers are
        integers or terminating decimals with at most 2 decimal places)
    discount_and_change, fraction_sharing, multi_leg_trip, family_ages,
    savings_after_spending, recipe_cost, paint_walls, workers_join, overtime_pay,
    tank_fill, percent_change, bulk_bag_savings

Pools: per level, draw from ``random.Random(f"{level}-{seed}")`` until ``POOL_SIZE`` distinct
questions exist; a question is in ``test`` when sha256(question) % 10 == 0, so the split of a
question never depends on generation order and train/test never share a question text.
"""

from __future__ import annotations

import functools
import html
import math
import random
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from fractions import Fraction

from boltzoo.envs.data.files import (
    check_choice,
    hash_split,
    short_digest,
)
from boltzoo.envs.tools.calculator import CalculatorError, calculate

__all__ = [
    "LEVELS",
    "POOL_SIZE",
    "SPLITS",
    "MathTask",
    "generate_tasks",
]

LEVELS = ("easy", "medium", "hard")
SPLITS = ("train", "test")
# Distinct questions drawn per (level, seed) before splitting; ~10% of them land in test.
POOL_SIZE = 2200
# Give up after this many draws per wanted question (a level that cannot reach POOL_SIZE).
_MAX_DRAWS_PER_TASK = 50


@dataclass(frozen=True)
class MathTask:
    """One math word problem.

    Attributes:
        task_id: Stable id: ``"{level}-{8 hex of sha256(question)}"`` for generated tasks,
            the row's ``id`` or ``"gsm8k-{i}"`` / ``"calcx-{i}"`` for file rows.
        question: The problem text shown to the solver.
        answer: Canonical numeric string of the gold answer: an integer (``"42"``), an exact
            terminating decimal (``"12.5"``) or, for non-terminating file answers, ``"a/b"``.
        expression: One calculator expression (``+ - * / ( )``, integers/decimals) that
            evaluates exactly to ``answer``; None when unknown.
        level: ``"easy"`` | ``"medium"`` | ``"hard"`` | ``"file"``.
        template: Template name for generated tasks, None for file rows.
    """

    task_id: str
    question: str
    answer: str
    expression: str | None
    level: str
    template: str | None


# ---------------------------------------------------------------------------------------------
# Exact numbers and expressions
# ---------------------------------------------------------------------------------------------

# Plain arithmetic: what task expressions may contain, a subset of the calculator's grammar.
_PLAIN_ARITHMETIC_RE = re.compile(r"[0-9.+\-*/()\s]+")


def exact_value(expression: str) -> Fraction | None:
    """Return the exact value of ``+ - * / ( )`` over integers/decimals; None if not that.

    The calculator does the arithmetic; ``**``, ``//``, ``%``, functions, exponents and
    anything it refuses (division by zero, its size limits) give None, as does a float value.
    No time limit: plain arithmetic is quick, and a busy machine must not change the result.
    """
    if not _PLAIN_ARITHMETIC_RE.fullmatch(expression) or "**" in expression or "//" in expression:
        return None
    try:
        value = calculate(expression, time_limit_s=math.inf)
    except CalculatorError:
        return None
    return value if isinstance(value, Fraction) else None


def _decimal_places(value: Fraction) -> int | None:
    """Digits after the point needed to write ``value`` exactly; None if it never terminates."""
    denominator = value.denominator
    twos = fives = 0
    while denominator % 2 == 0:
        denominator //= 2
        twos += 1
    while denominator % 5 == 0:
        denominator //= 5
        fives += 1
    return max(twos, fives) if denominator == 1 else None


def canonical_number(value: Fraction) -> str:
    """``42``, ``12.5``, ``-0.25``; ``a/b`` only for non-terminating values."""
    places = _decimal_places(value)
    if places is None:
        return f"{value.numerator}/{value.denominator}"
    if places == 0:
        return str(value.numerator)
    scaled = abs(value.numerator * 10**places // value.denominator)
    digits = str(scaled).rjust(places + 1, "0")
    sign = "-" if value < 0 else ""
    return f"{sign}{digits[:-places]}.{digits[-places:]}"


_PLAIN_NUMBER_RE = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")


def parse_number(text: str) -> Fraction:
    """Parse ``"1,234"``, ``"3_600"``, ``"12.5"``, ``"-1/3"``, ``"(1/2)"``, ``"$7"`` exactly."""
    cleaned = text.strip().rstrip(".").strip()
    while cleaned.startswith("(") and cleaned.endswith(")"):
        cleaned = cleaned[1:-1].strip()
    cleaned = cleaned.replace("$", "")
    # Thousands separators only: "1,234" and "3_600", never "1,5" (a decimal comma).
    cleaned = re.sub(r"(?<=\d),(?=\d{3}(?!\d))", "", cleaned)
    cleaned = re.sub(r"(?<=\d)_(?=\d)", "", cleaned)
    parts = [part.strip() for part in cleaned.split("/")]
    if not 1 <= len(parts) <= 2 or not all(_PLAIN_NUMBER_RE.fullmatch(part) for part in parts):
        raise ValueError(f"not a number: {text!r}")
    value = Fraction(parts[0])
    if len(parts) == 2:
        denominator = Fraction(parts[1])
        if denominator == 0:
            raise ValueError(f"zero denominator: {text!r}")
        value /= denominator
    return value


def normalise_expression(expression: str) -> str | None:
    """Calculator-ready form of a file's expression, or None if it is not plain arithmetic."""
    cleaned = html.unescape(expression).strip()
    cleaned = re.sub(r"(?<=\d),(?=\d{3}(?!\d))", "", cleaned)
    cleaned = re.sub(r"(?<=\d)_(?=\d)", "", cleaned)
    cleaned = re.sub(r"\s+", "", cleaned)
    return cleaned if exact_value(cleaned) is not None else None


def _operation_count(expression: str) -> int:
    """Return how many ``+ - * /`` (binary or unary) a plain-arithmetic expression has."""
    return sum(expression.count(operator) for operator in "+-*/")


# ---------------------------------------------------------------------------------------------
# Word pools
# ---------------------------------------------------------------------------------------------

_NAMES = (
    "Ava", "Ben", "Chloe", "Daniel", "Emma", "Farid", "Grace", "Hiro", "Isla", "Jamal",
    "Kira", "Liam", "Maya", "Noah", "Olivia", "Priya", "Quinn", "Rosa", "Sam", "Tariq",
    "Uma", "Victor", "Wen", "Ximena", "Yusuf", "Zoe", "Aiden", "Bea", "Carlos", "Dara",
)  # fmt: skip
_SHOP_ITEMS = (
    "book", "backpack", "board game", "pair of shoes", "lamp", "scarf", "toy robot",
    "umbrella", "jacket", "puzzle", "water bottle", "hat", "football", "kite", "watch",
)  # fmt: skip
_COLLECTIBLES = (
    "stickers", "marbles", "stamps", "trading cards", "seashells", "coins", "beads",
    "postcards", "pebbles", "comic books",
)  # fmt: skip
_SHAREABLES = (
    "cookies", "cupcakes", "apples", "candies", "muffins", "strawberries", "pencils",
    "crayons", "balloons", "oranges",
)  # fmt: skip
# (plural item, lowest price, highest price) for "n items at $p each".
_PRICED_ITEMS = (
    ("notebooks", 2, 9), ("pens", 2, 6), ("sandwiches", 4, 12), ("movie tickets", 8, 20),
    ("T-shirts", 9, 30), ("plants", 5, 25), ("toy cars", 3, 15), ("packs of cards", 3, 10),
    ("pizzas", 9, 24), ("books", 6, 35),
)  # fmt: skip
_GOALS = (
    "a bike", "a game console", "a telescope", "a guitar", "a tablet", "a pair of skates",
    "a camera", "a keyboard",
)  # fmt: skip
_STORES = ("the corner shop", "the supermarket", "the market", "the mall", "the warehouse store")
_FRACTION_WORDS = {2: "half", 3: "a third", 4: "a quarter", 5: "a fifth"}


def _a(noun: str) -> str:
    return ("an " if noun[0] in "aeiou" else "a ") + noun


def _money(value: Fraction | int) -> str:
    value = Fraction(value)
    return f"${value.numerator}" if value.denominator == 1 else f"${float(value):.2f}"


def _hours(count: int) -> str:
    return f"{count} hour" if count == 1 else f"{count} hours"


def _times(factor: int) -> str:
    return "twice" if factor == 2 else f"{factor} times"


def _num(value: Fraction | int) -> str:
    """A number as written inside an expression (no float reprs)."""
    return canonical_number(Fraction(value))


def _cents_only(value: Fraction) -> bool:
    places = _decimal_places(value)
    return places is not None and places <= 2


@dataclass(frozen=True)
class _Draft:
    question: str | tuple[str, ...]  # phrasings: the pool draws one, a template's last draw
    expression: str
    answer: Fraction


Template = Callable[[random.Random], _Draft]


# ---------------------------------------------------------------------------------------------
# easy: one or two operations, every number two-digit
# ---------------------------------------------------------------------------------------------


def _easy_shopping_change(rng: random.Random) -> _Draft:
    name = rng.choice(_NAMES)
    if rng.random() < 0.5:
        item = rng.choice(_SHOP_ITEMS)
        budget = rng.randint(20, 99)
        price = rng.randint(10, budget)
        question = (
            f"{name} has ${budget} and buys {_a(item)} for ${price}. "
            f"How many dollars does {name} have left?",
            f"{name} pays for {_a(item)} that costs ${price} with ${budget}. "
            f"How many dollars of change does {name} get back?",
            f"{_a(item).capitalize()} costs ${price}. {name} brought ${budget} to the store. "
            f"How many dollars are left after buying the {item}?",
        )
        return _Draft(question, f"{budget}-{price}", Fraction(budget - price))
    first, second = rng.sample(_SHOP_ITEMS, 2)
    budget = rng.randint(30, 99)
    first_price = rng.randint(10, budget - 20)
    second_price = rng.randint(10, budget - first_price)
    question = (
        f"{name} has ${budget}. {name} buys {_a(first)} for ${first_price} and "
        f"{_a(second)} for ${second_price}. How many dollars does {name} have left?",
        f"With ${budget} in a wallet, {name} spends ${first_price} on {_a(first)} and "
        f"${second_price} on {_a(second)}. How much money, in dollars, is left?",
    )
    return _Draft(
        question,
        f"{budget}-{first_price}-{second_price}",
        Fraction(budget - first_price - second_price),
    )


def _easy_sharing_equally(rng: random.Random) -> _Draft:
    name = rng.choice(_NAMES)
    things = rng.choice(_SHAREABLES)
    if rng.random() < 0.5:
        people = rng.randint(10, 49)
        each = rng.randint(2, 99 // people)
        total = people * each
        question = (
            f"{name} has {total} {things} and shares them equally among {people} "
            f"classmates. How many {things} does each classmate get?",
            f"{total} {things} are packed into bags of {people}. How many bags are filled?",
            f"A teacher splits {total} {things} evenly between {people} students. "
            f"How many {things} does each student receive?",
        )
        return _Draft(question, f"{total}/{people}", Fraction(each))
    # Two operations: pool two amounts first, then share.
    while True:
        people = rng.randint(10, 40)
        each = rng.randint(2, 198 // people)
        total = people * each
        if total >= 20:
            break
    first = rng.randint(max(10, total - 99), min(99, total - 10))
    second = total - first
    other = rng.choice([n for n in _NAMES if n != name])
    question = (
        f"{name} has {first} {things} and {other} has {second}. They put them together and "
        f"share them equally among {people} friends. How many {things} does each friend get?",
        f"A club collects {first} {things} on Monday and {second} on Tuesday. The {things} "
        f"are split evenly into {people} boxes. How many {things} go in each box?",
    )
    return _Draft(question, f"({first}+{second})/{people}", Fraction(each))


def _easy_collection_growth(rng: random.Random) -> _Draft:
    name = rng.choice(_NAMES)
    things = rng.choice(_COLLECTIBLES)
    start, gift = rng.randint(10, 99), rng.randint(10, 99)
    if rng.random() < 0.5:
        question = (
            f"{name} has {start} {things}. A friend gives {name} {gift} more. "
            f"How many {things} does {name} have now?",
            f"{name} collected {start} {things} last month and {gift} {things} this month. "
            f"How many {things} has {name} collected in total?",
        )
        return _Draft(question, f"{start}+{gift}", Fraction(start + gift))
    bought = rng.randint(10, 99)
    question = (
        f"{name} has {start} {things}. {name} gets {gift} more as a gift and then buys "
        f"{bought} more. How many {things} does {name} have now?",
        f"{name} found {start} {things} on Saturday, {gift} on Sunday and {bought} on "
        f"Monday. How many {things} did {name} find altogether?",
    )
    return _Draft(question, f"{start}+{gift}+{bought}", Fraction(start + gift + bought))


def _easy_giving_away(rng: random.Random) -> _Draft:
    name = rng.choice(_NAMES)
    things = rng.choice(_SHAREABLES)
    friend, sibling = rng.sample([n for n in _NAMES if n != name], 2)
    if rng.random() < 0.5:
        start = rng.randint(20, 99)
        given = rng.randint(10, start - 10)
        question = (
            f"{name} baked {start} {things} and gave {given} of them to {friend}. "
            f"How many {things} does {name} have left?",
            f"There were {start} {things} in a basket. {friend} took {given}. "
            f"How many {things} are still in the basket?",
        )
        return _Draft(question, f"{start}-{given}", Fraction(start - given))
    start = rng.randint(30, 99)
    first = rng.randint(10, start - 20)
    second = rng.randint(10, start - first - 10)  # start - first >= 20, so this is valid
    question = (
        f"{name} has {start} {things}. {name} gives {first} to {friend} and {second} to "
        f"{sibling}. How many {things} does {name} keep?",
        f"A box holds {start} {things}. {friend} takes {first} and {sibling} takes "
        f"{second}. How many {things} remain in the box?",
    )
    return _Draft(question, f"{start}-{first}-{second}", Fraction(start - first - second))


_EASY_RATES = (
    ("A printer prints {r} pages every minute.", "pages", "minutes"),
    ("A bottling machine fills {r} bottles each minute.", "bottles", "minutes"),
    ("A bakery makes {r} loaves of bread every hour.", "loaves", "hours"),
    ("{name} types {r} words per minute.", "words", "minutes"),
    ("A pump moves {r} litres of water each minute.", "litres", "minutes"),
    ("A factory line builds {r} toy cars per hour.", "toy cars", "hours"),
    ("{name} reads {r} pages every day.", "pages", "days"),
)


def _easy_production_rate(rng: random.Random) -> _Draft:
    name = rng.choice(_NAMES)
    setup, things, unit = rng.choice(_EASY_RATES)
    rate, duration = rng.randint(10, 60), rng.randint(10, 60)
    setup = setup.format(r=rate, name=name)
    question = (
        f"{setup} How many {things} is that in {duration} {unit}?",
        f"{setup} At the same rate, how many {things} are there after {duration} {unit}?",
    )
    return _Draft(question, f"{rate}*{duration}", Fraction(rate * duration))


def _easy_ages(rng: random.Random) -> _Draft:
    name, other = rng.sample(_NAMES, 2)
    age = rng.randint(10, 60)
    gap = rng.randint(10, 30)
    variant = rng.randrange(3)
    if variant == 0:
        question = (
            f"{name} is {age} years old. {other} is {gap} years older than {name}. "
            f"How old is {other}?",
            f"{other} was born {gap} years before {name}. If {name} is {age} years old, "
            f"how old is {other}?",
        )
        return _Draft(question, f"{age}+{gap}", Fraction(age + gap))
    if variant == 1:
        age = rng.randint(max(20, gap + 10), 80)
        question = (
            f"{name} is {age} years old and {other} is {gap} years younger. "
            f"How old is {other}?",
            f"{other} is {gap} years younger than {name}, who is {age}. What is {other}'s age?",
        )
        return _Draft(question, f"{age}-{gap}", Fraction(age - gap))
    later = rng.randint(10, 20)
    question = (
        f"{name} is {age} years old. {other} is {gap} years older than {name}. "
        f"How old will {other} be in {later} years?",
        f"{other} is {gap} years older than {name}, and {name} is {age} now. "
        f"How old will {other} be {later} years from now?",
    )
    return _Draft(question, f"{age}+{gap}+{later}", Fraction(age + gap + later))


_AREAS = (
    ("A rectangular garden", "metres"),
    ("A classroom floor", "feet"),
    ("A rectangular rug", "inches"),
    ("A football practice field", "metres"),
    ("A rectangular parking lot", "metres"),
    ("A wall poster", "centimetres"),
)


def _easy_rectangle_area(rng: random.Random) -> _Draft:
    thing, unit = rng.choice(_AREAS)
    length, width = rng.randint(10, 60), rng.randint(10, 60)
    question = (
        f"{thing} is {length} {unit} long and {width} {unit} wide. What is its area "
        f"in square {unit}?",
        f"{thing} measures {length} {unit} by {width} {unit}. How many square {unit} "
        f"does it cover?",
    )
    return _Draft(question, f"{length}*{width}", Fraction(length * width))


def _easy_weekly_savings(rng: random.Random) -> _Draft:
    name = rng.choice(_NAMES)
    weekly, weeks = rng.randint(10, 50), rng.randint(10, 52)
    if rng.random() < 0.5:
        question = (
            f"{name} saves ${weekly} every week. How many dollars will {name} have saved "
            f"after {weeks} weeks?",
            f"Each week {name} puts ${weekly} into a piggy bank. How much money, in dollars, "
            f"is in the piggy bank after {weeks} weeks?",
        )
        return _Draft(question, f"{weekly}*{weeks}", Fraction(weekly * weeks))
    start = rng.randint(10, 99)
    question = (
        f"{name} already has ${start} and saves ${weekly} more every week. How many dollars "
        f"will {name} have after {weeks} weeks?",
        f"A savings jar holds ${start}. {name} adds ${weekly} to it each week for {weeks} "
        f"weeks. How many dollars are in the jar then?",
    )
    return _Draft(question, f"{start}+{weekly}*{weeks}", Fraction(start + weekly * weeks))


_COMPARISONS = (
    ("read", "pages"),
    ("scored", "points"),
    ("ran", "laps"),
    ("picked", "apples"),
    ("sold", "raffle tickets"),
    ("folded", "paper cranes"),
)


def _easy_compare_difference(rng: random.Random) -> _Draft:
    name, other = rng.sample(_NAMES, 2)
    verb, things = rng.choice(_COMPARISONS)
    if rng.random() < 0.5:
        more = rng.randint(20, 99)
        fewer = rng.randint(10, more)
        question = (
            f"{name} {verb} {more} {things} and {other} {verb} {fewer} {things}. "
            f"How many more {things} did {name} get than {other}?",
            f"{other} {verb} {fewer} {things}, while {name} {verb} {more}. "
            f"How many fewer {things} did {other} have?",
        )
        return _Draft(question, f"{more}-{fewer}", Fraction(more - fewer))
    monday, tuesday = rng.randint(10, 99), rng.randint(10, 99)
    fewer = rng.randint(10, min(99, monday + tuesday))
    question = (
        f"{name} {verb} {monday} {things} on Monday and {tuesday} on Tuesday. {other} {verb} "
        f"{fewer} {things} over both days. How many more {things} did {name} get than {other}?"
    )
    return _Draft(question, f"{monday}+{tuesday}-{fewer}", Fraction(monday + tuesday - fewer))


_VEHICLES = (("A bus", "passengers"), ("A train car", "people"), ("A ferry", "travellers"))


def _easy_bus_passengers(rng: random.Random) -> _Draft:
    vehicle, riders = rng.choice(_VEHICLES)
    start = rng.randint(10, 99)
    off = rng.randint(10, start)
    on = rng.randint(10, 99)
    question = (
        f"{vehicle} has {start} {riders}. At the next stop {off} get off and {on} get on. "
        f"How many {riders} are there now?",
        f"{vehicle} leaves with {start} {riders} on board. At the first stop, {off} "
        f"{riders} leave and {on} new ones board. How many {riders} are on board now?",
    )
    return _Draft(question, f"{start}-{off}+{on}", Fraction(start - off + on))


# ---------------------------------------------------------------------------------------------
# medium: two or three operations, numbers up to 500
# ---------------------------------------------------------------------------------------------


def _bill_for(rng: random.Random, cost: Fraction | int, bills: tuple[int, ...]) -> int:
    """A bill that covers ``cost``; usually the smallest one, sometimes the next."""
    covering = [bill for bill in bills if bill >= cost]
    return covering[1] if len(covering) > 1 and rng.random() < 0.3 else covering[0]


def _medium_shopping_change(rng: random.Random) -> _Draft:
    name = rng.choice(_NAMES)
    items, low, high = rng.choice(_PRICED_ITEMS)
    count, price = rng.randint(2, 9), rng.randint(low, high)
    if rng.random() < 0.5:
        bill = _bill_for(rng, count * price, (50, 100, 200, 500))
        question = (
            f"{name} buys {count} {items} at ${price} each and pays with a ${bill} bill. "
            f"How much change, in dollars, does {name} get?",
            f"{items.capitalize()} cost ${price} each. {name} buys {count} of them and hands "
            f"over ${bill}. How many dollars of change come back?",
        )
        return _Draft(question, f"{bill}-{count}*{price}", Fraction(bill - count * price))
    extra = rng.choice(_SHOP_ITEMS)
    extra_price = rng.randint(5, 60)
    total = count * price + extra_price
    bill = _bill_for(rng, total, (50, 100, 200, 500))
    question = (
        f"{name} buys {count} {items} for ${price} each and {_a(extra)} for ${extra_price}. "
        f"{name} pays with ${bill}. How much change, in dollars, does {name} receive?",
        f"At the store, {name} picks {count} {items} costing ${price} each and "
        f"{_a(extra)} costing ${extra_price}. If {name} pays with a ${bill} bill, how many "
        f"dollars of change should {name} get?",
    )
    return _Draft(question, f"{bill}-({count}*{price}+{extra_price})", Fraction(bill - total))


_SALE_ITEMS = (
    "jacket", "bicycle", "guitar", "tablet", "pair of boots", "desk chair", "tent", "suitcase",
    "coffee maker", "printer",
)  # fmt: skip


def _round_price_for(rng: random.Random, percent: int, high: int) -> int:
    """A round price (multiple of 10) whose ``percent`` % is a whole number of dollars."""
    step = math.lcm(10, 100 // math.gcd(percent, 100))
    return rng.randrange(step, high + 1, step)


def _medium_sale_discount(rng: random.Random) -> _Draft:
    name = rng.choice(_NAMES)
    item = rng.choice(_SALE_ITEMS)
    percent = rng.choice((10, 20, 25, 30, 40, 50, 75))
    price = _round_price_for(rng, percent, 400)
    if rng.random() < 0.5:
        question = (
            f"{_a(item).capitalize()} normally costs ${price}. This week it is {percent}% "
            f"off. What is the sale price in dollars?",
            f"{name} wants {_a(item)} priced at ${price}. The shop takes {percent}% off the "
            f"price. How many dollars does {name} pay?",
        )
        return _Draft(
            question, f"{price}-{price}*{percent}/100", Fraction(price * (100 - percent), 100)
        )
    count = rng.randint(2, 6)
    question = (
        f"A {item} costs ${price}, and during a sale every {item} is {percent}% off. {name} buys "
        f"{count} of them. How many dollars does {name} save in total?"
    )
    return _Draft(
        question, f"{count}*{price}*{percent}/100", Fraction(count * price * percent, 100)
    )


def _medium_sharing_after_eating(rng: random.Random) -> _Draft:
    name = rng.choice(_NAMES)
    things = rng.choice(_SHAREABLES)
    friends, each = rng.randint(2, 12), rng.randint(3, 30)
    if rng.random() < 0.5:
        eaten = rng.randint(2, 60)
        total = friends * each + eaten
        question = (
            f"{name} had {total} {things}, kept {eaten} and shared the rest equally among "
            f"{friends} friends. How many {things} did each friend get?",
            f"A bag holds {total} {things}. After {eaten} are used, the rest are split evenly "
            f"into {friends} boxes. How many {things} are in each box?",
        )
        return _Draft(question, f"({total}-{eaten})/{friends}", Fraction(each))
    bought = rng.randint(2, friends * each - 1)
    start = friends * each - bought
    question = (
        f"{name} has {start} {things} and buys {bought} more. {name} then divides all of "
        f"them equally among {friends} friends. How many {things} does each friend get?",
        f"A class has {start} {things} and a parent brings {bought} more. The {things} are "
        f"shared equally by {friends} tables. How many {things} does each table get?",
    )
    return _Draft(question, f"({start}+{bought})/{friends}", Fraction(each))


# (verb, distance unit, speed unit, lowest speed, highest speed) by level
_TRIPS = {
    "medium": (
        ("drives", "km", "km per hour", 40, 120),
        ("cycles", "km", "km per hour", 10, 30),
        ("rides a train", "miles", "miles per hour", 50, 120),
        ("sails", "nautical miles", "knots", 10, 30),
    ),
    "hard": (
        ("drives", "kilometres", "km per hour", 40, 120),
        ("cycles", "kilometres", "km per hour", 10, 30),
        ("travels by train", "miles", "miles per hour", 50, 150),
        ("sails", "nautical miles", "knots", 8, 30),
    ),
}


def _medium_two_leg_trip(rng: random.Random) -> _Draft:
    name = rng.choice(_NAMES)
    verb, unit, speed_unit, low, high = rng.choice(_TRIPS["medium"])
    speeds = [rng.randrange(low, high + 1, 5) for _ in range(2)]
    hours = [rng.randint(2, 6), rng.randint(2, 6)]
    if rng.random() < 0.5:
        question = (
            f"{name} {verb} at {speeds[0]} {speed_unit} for {hours[0]} hours, then at "
            f"{speeds[1]} {speed_unit} for {hours[1]} hours. How many {unit} is that in total?"
        )
        return _Draft(
            question,
            f"{speeds[0]}*{hours[0]}+{speeds[1]}*{hours[1]}",
            Fraction(speeds[0] * hours[0] + speeds[1] * hours[1]),
        )
    if speeds[0] * hours[0] < speeds[1] * hours[1]:  # keep the difference non-negative
        speeds.reverse()
        hours.reverse()
    question = (
        f"On Monday {name} {verb} at {speeds[0]} {speed_unit} for {hours[0]} hours. On Tuesday "
        f"{name} {verb} at {speeds[1]} {speed_unit} for {hours[1]} hours. How many more {unit} "
        f"did {name} cover on Monday than on Tuesday?"
    )
    return _Draft(
        question,
        f"{speeds[0]}*{hours[0]}-{speeds[1]}*{hours[1]}",
        Fraction(speeds[0] * hours[0] - speeds[1] * hours[1]),
    )


def _medium_ages_multiple(rng: random.Random) -> _Draft:
    young, old, third = rng.sample(_NAMES, 3)
    age, times = rng.randint(4, 20), rng.randint(2, 5)
    variant = rng.randrange(3)
    intro = f"{young} is {age} years old. {old} is {_times(times)} as old as {young}."
    if variant == 0:
        gap = rng.randint(1, times * age - 1)
        question = f"{intro} {third} is {gap} years younger than {old}. How old is {third}?"
        return _Draft(question, f"{times}*{age}-{gap}", Fraction(times * age - gap))
    if variant == 1:
        later = rng.randint(2, 15)
        question = f"{intro} How old will {old} be in {later} years?"
        return _Draft(question, f"{times}*{age}+{later}", Fraction(times * age + later))
    question = f"{intro} What is the sum of their ages?"
    return _Draft(question, f"{age}+{times}*{age}", Fraction(age + times * age))


def _medium_savings_goal(rng: random.Random) -> _Draft:
    name = rng.choice(_NAMES)
    goal = rng.choice(_GOALS)
    weekly, weeks = rng.randint(5, 40), rng.randint(3, 20)
    saved = rng.randint(5, 100)
    price = saved + weekly * weeks
    if price > 500:
        weeks = (500 - saved) // weekly
        price = saved + weekly * weeks
    question = (
        f"{name} wants {goal} that costs ${price}. {name} has already saved ${saved} and "
        f"saves ${weekly} each week. How many weeks until {name} has enough?",
        f"{goal.capitalize()} costs ${price}. {name} has ${saved} and adds ${weekly} every "
        f"week. After how many weeks will {name} have exactly enough?",
    )
    return _Draft(question, f"({price}-{saved})/{weekly}", Fraction(weeks))


_INGREDIENTS = (
    "grams of flour", "grams of sugar", "millilitres of milk", "grams of butter",
    "grams of rice", "grams of cheese", "millilitres of stock",
)  # fmt: skip
_DISHES = ("pancakes", "soup", "muffins", "fried rice", "lasagna", "porridge", "curry")


def _medium_recipe_scaling(rng: random.Random) -> _Draft:
    name = rng.choice(_NAMES)
    ingredient, dish = rng.choice(_INGREDIENTS), rng.choice(_DISHES)
    servings = rng.randint(2, 8)
    per_serving = rng.randint(5, 500 // servings)
    amount = per_serving * servings
    wanted = rng.choice([n for n in range(2, 21) if n != servings])
    needed = per_serving * wanted
    intro = f"A recipe for {servings} servings of {dish} uses {amount} {ingredient}."
    if rng.random() < 0.5:
        question = (
            f"{intro} How many {ingredient} are needed for {wanted} servings?",
            f"{intro} {name} is making {wanted} servings. How many {ingredient} does "
            f"{name} need?",
        )
        return _Draft(question, f"{amount}/{servings}*{wanted}", Fraction(needed))
    have = rng.randint(1, min(needed - 1, 500))  # needed >= 10 (5 grams x 2 servings)
    question = (
        f"{intro} {name} wants to make {wanted} servings and already has {have} {ingredient}. "
        f"How many more {ingredient} does {name} need?"
    )
    return _Draft(question, f"{amount}/{servings}*{wanted}-{have}", Fraction(needed - have))


def _medium_fencing_cost(rng: random.Random) -> _Draft:
    name = rng.choice(_NAMES)
    length, width = rng.randint(5, 60), rng.randint(5, 60)
    place = rng.choice(("garden", "yard", "paddock", "vegetable patch", "playground"))
    variant = rng.randrange(3)
    if variant == 0:
        question = (
            f"A rectangular {place} is {length} metres long and {width} metres wide. How many "
            f"metres of fence are needed to go all the way around it?"
        )
        return _Draft(question, f"({length}+{width})*2", Fraction((length + width) * 2))
    cost = rng.randint(2, 12)
    if variant == 1:
        question = (
            f"{name} is fencing a rectangular {place} that measures {length} m by {width} m. "
            f"Fencing costs ${cost} per metre. How many dollars does fencing the whole "
            f"border cost?"
        )
        return _Draft(
            question, f"({length}+{width})*2*{cost}", Fraction((length + width) * 2 * cost)
        )
    question = (
        f"A square {place} has sides of {length} metres. Fencing costs ${cost} per metre. "
        f"How much, in dollars, does it cost to fence all four sides?"
    )
    return _Draft(question, f"{length}*4*{cost}", Fraction(length * 4 * cost))


def _medium_workers_wages(rng: random.Random) -> _Draft:
    name = rng.choice(_NAMES)
    variant = rng.randrange(3)
    if variant == 0:
        workers, hours, rate = rng.randint(2, 9), rng.randint(3, 10), rng.randint(8, 30)
        job = rng.choice(("painters", "cleaners", "movers", "gardeners", "cooks"))
        question = (
            f"A company hires {workers} {job}. Each works {hours} hours and is paid ${rate} per "
            f"hour. How many dollars does the company pay in total?"
        )
        return _Draft(question, f"{workers}*{hours}*{rate}", Fraction(workers * hours * rate))
    if variant == 1:
        rate, first, second = rng.randint(8, 30), rng.randint(2, 10), rng.randint(2, 10)
        question = (
            f"{name} earns ${rate} per hour. {name} works {first} hours on Saturday and "
            f"{second} hours on Sunday. How many dollars does {name} earn over the weekend?"
        )
        return _Draft(question, f"{rate}*({first}+{second})", Fraction(rate * (first + second)))
    workers, days = rng.randint(2, 8), rng.randint(2, 6)
    each = rng.randint(2, 500 // (workers * days))
    boxes = workers * days * each
    question = (
        f"A team of {workers} workers must pack {boxes} boxes in {days} days, sharing the work "
        f"equally. How many boxes must each worker pack per day?"
    )
    return _Draft(question, f"{boxes}/{workers}/{days}", Fraction(each))


def _medium_giving_fraction(rng: random.Random) -> _Draft:
    name = rng.choice(_NAMES)
    friend, sibling = rng.sample([n for n in _NAMES if n != name], 2)
    things = rng.choice(_COLLECTIBLES + _SHAREABLES)
    parts = rng.choice((2, 3, 4, 5))
    total = parts * rng.randint(4, 300 // parts)
    kept = total - total // parts
    given = rng.randint(1, kept)
    word = _FRACTION_WORDS[parts]
    question = (
        f"{name} has {total} {things}. {name} gives {word} of them to {friend} and {given} "
        f"to {sibling}. How many {things} does {name} have left?",
        f"There are {total} {things} in a jar. {friend} takes {word} of them, then {sibling} "
        f"takes {given}. How many {things} are left in the jar?",
    )
    return _Draft(question, f"{total}-{total}/{parts}-{given}", Fraction(kept - given))


_UNIT_ITEMS = (
    ("pen", "pens"), ("notebook", "notebooks"), ("battery", "batteries"),
    ("soap bar", "soap bars"), ("juice box", "juice boxes"), ("light bulb", "light bulbs"),
    ("tennis ball", "tennis balls"), ("candle", "candles"),
)  # fmt: skip


def _medium_unit_price_comparison(rng: random.Random) -> _Draft:
    single, plural = rng.choice(_UNIT_ITEMS)
    dear_store, cheap_store = rng.sample(_STORES, 2)
    dear_pack, cheap_pack = rng.randint(2, 12), rng.randint(2, 12)
    cheap_unit = rng.randint(1, 15)
    dear_unit = rng.randint(cheap_unit + 1, 20)
    dear_price, cheap_price = dear_pack * dear_unit, cheap_pack * cheap_unit
    question = (
        f"At {dear_store}, a pack of {dear_pack} {plural} costs ${dear_price}. At "
        f"{cheap_store}, a pack of {cheap_pack} {plural} costs ${cheap_price}. How many "
        f"dollars more per {single} does {dear_store} charge?",
        f"{cheap_store.capitalize()} sells {cheap_pack} {plural} for ${cheap_price}, and "
        f"{dear_store} sells {dear_pack} {plural} for ${dear_price}. How much cheaper, in "
        f"dollars, is one {single} at {cheap_store}?",
    )
    return _Draft(
        question,
        f"{dear_price}/{dear_pack}-{cheap_price}/{cheap_pack}",
        Fraction(dear_unit - cheap_unit),
    )


# ---------------------------------------------------------------------------------------------
# hard: three to five operations, percentages, fractions, rates; answers to the cent
# ---------------------------------------------------------------------------------------------


def _hard_discount_and_change(rng: random.Random) -> _Draft:
    name = rng.choice(_NAMES)
    items, low, high = rng.choice(_PRICED_ITEMS)
    count = rng.randint(2, 8)
    for _ in range(100):
        price = Fraction(rng.randint(low * 4, high * 4), 4)  # whole quarters of a dollar
        percent = rng.choice((10, 15, 20, 25, 30, 40, 50))
        cost = count * price * (100 - percent) / 100
        if _cents_only(cost):
            break
    else:  # 20% off a quarter-dollar price always lands on a whole cent
        percent = 20
        cost = count * price * (100 - percent) / 100
    priced = f"{count}*{_num(price)}*(100-{percent})/100"
    if rng.random() < 0.5:
        question = (
            f"{name} buys {count} {items} at {_money(price)} each. The store takes {percent}% "
            f"off the whole purchase. How much, in dollars, does {name} pay?"
        )
        return _Draft(question, priced, cost)
    bill = _bill_for(rng, cost, (20, 50, 100, 200, 500))
    question = (
        f"{name} buys {count} {items} priced at {_money(price)} each and gets {percent}% off "
        f"the total. {name} pays with a ${bill} bill. How much change, in dollars, does "
        f"{name} get?",
        f"{items.capitalize()} cost {_money(price)} each, and today everything is {percent}% "
        f"off. {name} buys {count} of them and hands the cashier ${bill}. How many dollars "
        f"of change should {name} receive?",
    )
    return _Draft(question, f"{bill}-{priced}", bill - cost)


def _hard_fraction_sharing(rng: random.Random) -> _Draft:
    name = rng.choice(_NAMES)
    friend, sibling = rng.sample([n for n in _NAMES if n != name], 2)
    things = rng.choice(_COLLECTIBLES + _SHAREABLES)
    parts = rng.choice((2, 3, 4, 5))
    groups, each = rng.randint(2, 6), rng.randint(3, 30)
    given = rng.randint(2, 40)
    # The part left after giving 1/parts away must be divisible by (parts - 1).
    given += (-(groups * each + given)) % (parts - 1)
    total = (groups * each + given) * parts // (parts - 1)
    recipients = rng.choice(("cousins", "teammates", "neighbours", "classmates"))
    question = (
        f"{name} has {total} {things}. {name} gives {_FRACTION_WORDS[parts]} of them to "
        f"{friend}, then {given} to {sibling}, and shares the rest equally among {groups} "
        f"{recipients}. How many {things} does each of the {recipients} get?",
        f"A box holds {total} {things}. First {friend} takes {_FRACTION_WORDS[parts]} of "
        f"them. Then {sibling} takes {given}. The remaining {things} are split evenly "
        f"between {groups} {recipients}. How many does each get?",
    )
    return _Draft(question, f"({total}-{total}/{parts}-{given})/{groups}", Fraction(each))


def _hard_multi_leg_trip(rng: random.Random) -> _Draft:
    name = rng.choice(_NAMES)
    verb, unit, speed_unit, low, high = rng.choice(_TRIPS["hard"])
    first_speed = rng.randint(low, high)
    first_hours = rng.randint(1, 5)
    for _ in range(100):
        second_speed = rng.randint(low, high)
        minutes = rng.choice((10, 15, 20, 25, 30, 40, 45, 50, 90))
        second_distance = Fraction(second_speed * minutes, 60)
        if _cents_only(second_distance):
            break
    else:  # 30 minutes at an even speed is always a whole distance
        second_speed, minutes = low + low % 2, 30
        second_distance = Fraction(second_speed * minutes, 60)
    travelled = first_speed * first_hours + second_distance
    legs = (
        f"{name} {verb} at {first_speed} {speed_unit} for {_hours(first_hours)}, then at "
        f"{second_speed} {speed_unit} for {minutes} minutes."
    )
    distance = f"{first_speed}*{first_hours}+{second_speed}*{minutes}/60"
    if rng.random() < 0.5:
        question = (
            f"{legs} How many {unit} does {name} cover in total?",
            f"{legs} What is the total distance travelled, in {unit}?",
        )
        return _Draft(question, distance, travelled)
    trip = math.ceil(travelled) + rng.randint(10, 200)
    question = (
        f"{name} sets out on a journey of {trip} {unit}. {legs} How many {unit} of the "
        f"journey are still left?",
        f"{legs} The whole route is {trip} {unit} long. How many {unit} remain?",
    )
    return _Draft(
        question,
        f"{trip}-{first_speed}*{first_hours}-{second_speed}*{minutes}/60",
        trip - travelled,
    )


def _hard_family_ages(rng: random.Random) -> _Draft:
    name = rng.choice(_NAMES)
    parent = rng.choice(("mother", "father", "aunt", "uncle"))
    elder = rng.choice(("grandmother", "grandfather"))
    while True:
        age, times = rng.randint(5, 15), rng.randint(2, 5)
        if (times - 1) * age >= 18 and times * age <= 60:  # a plausible parent
            break
    gap = rng.randint(20, 35)
    parent_age = times * age
    intro = (
        f"{name} is {age} years old. {name}'s {parent} is {_times(times)} as old as {name}, and "
        f"{name}'s {elder} is {gap} years older than the {parent}."
    )
    variant = rng.randrange(3)
    if variant == 0:
        later = rng.randint(2, 15)
        question = f"{intro} How old will the {elder} be in {later} years?"
        return _Draft(question, f"{times}*{age}+{gap}+{later}", Fraction(parent_age + gap + later))
    if variant == 1:
        question = f"{intro} What is the total of all three ages?"
        return _Draft(
            question,
            f"{age}+{times}*{age}+({times}*{age}+{gap})",
            Fraction(age + parent_age + parent_age + gap),
        )
    question = f"{intro} How many years older than {name} is the {elder}?"
    return _Draft(question, f"{times}*{age}+{gap}-{age}", Fraction(parent_age + gap - age))


_TREATS = (
    "a concert ticket", "new headphones", "a birthday present", "art supplies", "a video game",
    "a school trip", "books",
)  # fmt: skip


def _hard_savings_after_spending(rng: random.Random) -> _Draft:
    name = rng.choice(_NAMES)
    weekly, weeks = rng.randint(5, 60), rng.randint(4, 30)
    percent = rng.choice((10, 15, 20, 25, 30, 40, 50))
    first, second = rng.sample(_TREATS, 2)
    remaining = Fraction(weekly * weeks * (100 - percent), 100)
    spent = rng.randint(1, max(1, math.floor(remaining)))
    question = (
        f"{name} saves ${weekly} every week for {weeks} weeks. Then {name} spends {percent}% "
        f"of the savings on {first} and ${spent} on {second}. How many dollars does {name} "
        f"have left?",
        f"For {weeks} weeks, {name} puts away ${weekly} a week. {name} uses {percent}% of "
        f"the money for {first} and another ${spent} for {second}. How much money, in "
        f"dollars, remains?",
    )
    return _Draft(question, f"{weekly}*{weeks}*(100-{percent})/100-{spent}", remaining - spent)


_BAG_INGREDIENTS = ("flour", "sugar", "rice", "pasta", "cornmeal", "couscous")


def _hard_recipe_cost(rng: random.Random) -> _Draft:
    name = rng.choice(_NAMES)
    ingredient, dish = rng.choice(_BAG_INGREDIENTS), rng.choice(_DISHES)
    while True:
        servings = rng.randint(2, 8)
        per_serving = rng.choice((25, 40, 50, 60, 75, 80, 100, 125, 150, 200, 250))
        bag = rng.choice((500, 1000, 2000))
        step = bag // math.gcd(per_serving, bag)  # servings that use whole bags exactly
        choices = [n for n in range(step, 61, step) if n != servings]
        if choices:
            break
    wanted = rng.choice(choices)
    bags = per_serving * wanted // bag
    price = Fraction(rng.randint(4, 40), 4)
    amount = per_serving * servings
    question = (
        f"A recipe for {servings} servings of {dish} uses {amount} grams of {ingredient}. "
        f"{name} is cooking {wanted} servings. {ingredient.capitalize()} comes in "
        f"{bag}-gram bags costing {_money(price)} each. How much, in dollars, does {name} "
        f"spend on {ingredient}?",
        f"{name} scales a {servings}-serving {dish} recipe, which needs {amount} grams of "
        f"{ingredient}, up to {wanted} servings. A {bag}-gram bag of {ingredient} costs "
        f"{_money(price)}. What is the cost of the {ingredient} in dollars?",
    )
    return _Draft(question, f"{amount}/{servings}*{wanted}/{bag}*{_num(price)}", bags * price)


def _hard_paint_walls(rng: random.Random) -> _Draft:
    name = rng.choice(_NAMES)
    length, width = rng.randint(3, 9), rng.randint(3, 9)
    height = rng.choice((Fraction(5, 2), Fraction(3), Fraction(12, 5), Fraction(14, 5)))
    while True:
        openings = rng.randint(2, 8)
        wall_area = 2 * (length + width) * height - openings
        if rng.random() < 0.5:
            price = Fraction(rng.randint(4, 24), 4)
            cost = wall_area * price
            if _cents_only(cost):
                break
        else:
            price = None
            coverage = rng.choice((4, 5, 8, 10, 12))
            litres = wall_area / coverage
            if _cents_only(litres):
                break
    walls = f"2*({length}+{width})*{_num(height)}-{openings}"
    kind = rng.choice(("bedroom", "kitchen", "classroom", "office", "living room", "studio"))
    room = rng.choice(
        (
            f"{name} is painting the four walls of {_a(kind)} that is {length} m long, {width} m "
            f"wide and {float(height):g} m high. The door and window take up {openings} square "
            f"metres that will not be painted.",
            f"{_a(kind).capitalize()} measures {length} m by {width} m, and its walls are "
            f"{float(height):g} m high. {name} will paint all four walls except a door and "
            f"window with a total area of {openings} square metres.",
        )
    )
    if price is not None:
        question = (
            f"{room} Painting costs {_money(price)} per square metre. "
            f"How much, in dollars, does the painting cost?"
        )
        return _Draft(question, f"({walls})*{_num(price)}", cost)
    question = (
        f"{room} One litre of paint covers {coverage} square metres. How many litres of "
        f"paint are needed?"
    )
    return _Draft(question, f"({walls})/{coverage}", litres)


_ASSEMBLY = ("chairs", "birdhouses", "bicycles", "bookshelves", "lamps", "toy trains")


def _hard_workers_join(rng: random.Random) -> _Draft:
    things = rng.choice(_ASSEMBLY)
    workers, rate = rng.randint(2, 8), rng.randint(2, 12)
    if rng.random() < 0.5:
        before, extra = rng.randint(1, 4), rng.randint(1, 6)
        hours = rng.randint(before + 1, 10)
        question = (
            f"{workers} workers each assemble {rate} {things} per hour. After {_hours(before)}, "
            f"{extra} more workers join them and work at the same rate. How many {things} are "
            f"assembled in the first {hours} hours?"
        )
        return _Draft(
            question,
            f"({workers}*{hours}+{extra}*({hours}-{before}))*{rate}",
            Fraction((workers * hours + extra * (hours - before)) * rate),
        )
    hours_left = rng.randint(2, 12)
    done = rng.randint(10, 200)
    order = done + workers * rate * hours_left
    question = (
        f"A workshop must build {order} {things} and has already built {done}. {workers} "
        f"workers each build {rate} {things} per hour. How many more hours will it take to "
        f"finish the order?"
    )
    return _Draft(question, f"({order}-{done})/({workers}*{rate})", Fraction(hours_left))


def _hard_overtime_pay(rng: random.Random) -> _Draft:
    name = rng.choice(_NAMES)
    rate = rng.randint(10, 40)
    regular = rng.choice((30, 35, 36, 38, 40))
    if rng.random() < 0.5:
        worked = regular + rng.randint(1, 15)
        question = (
            f"{name} earns ${rate} per hour for the first {regular} hours of a week and 1.5 "
            f"times that rate for every extra hour. Last week {name} worked {worked} hours. "
            f"How many dollars did {name} earn?",
            f"A job pays ${rate} an hour up to {regular} hours a week, and overtime is paid "
            f"at 1.5 times the hourly rate. {name} worked {worked} hours this week. What "
            f"were {name}'s total earnings in dollars?",
        )
        return _Draft(
            question,
            f"{regular}*{rate}+({worked}-{regular})*{rate}*1.5",
            regular * rate + (worked - regular) * rate * Fraction(3, 2),
        )
    hours = rng.randint(10, 45)
    tax = rng.choice((8, 10, 12, 15, 18, 20, 22, 25))
    question = (
        f"{name} works {hours} hours at ${rate} per hour. {tax}% of the pay is withheld for "
        f"taxes. How much, in dollars, does {name} take home?",
        f"{name}'s job pays ${rate} an hour, and {tax}% of every paycheck goes to taxes. "
        f"After working {hours} hours, how many dollars does {name} keep?",
    )
    return _Draft(
        question, f"{hours}*{rate}*(100-{tax})/100", Fraction(hours * rate * (100 - tax), 100)
    )


def _hard_tank_fill(rng: random.Random) -> _Draft:
    container = rng.choice(("water tank", "swimming pool", "rain barrel", "fish tank"))
    inflow = rng.randint(5, 40)
    outflow = rng.randint(1, inflow - 1)
    minutes = rng.randint(5, 60)
    start = rng.randint(10, 300)
    net = (inflow - outflow) * minutes
    leak = (
        f"A hose adds {inflow} litres per minute, but a leak lets out {outflow} litres per minute."
    )
    if rng.random() < 0.5:
        capacity = start + net
        question = (
            f"A {container} holds {capacity} litres and already contains {start} litres. {leak} "
            f"How many minutes will it take to fill the {container}?"
        )
        return _Draft(question, f"({capacity}-{start})/({inflow}-{outflow})", Fraction(minutes))
    question = (
        f"A {container} contains {start} litres of water. {leak} How many litres are in the "
        f"{container} after {minutes} minutes?"
    )
    return _Draft(question, f"{start}+({inflow}-{outflow})*{minutes}", Fraction(start + net))


_SALES = ("cupcakes", "bicycles", "concert tickets", "potted plants", "books", "umbrellas")


def _hard_percent_change(rng: random.Random) -> _Draft:
    shop = rng.choice(("A bakery", "A shop", "A small company", "A school fair", "A kiosk"))
    things = rng.choice(_SALES)
    percent = rng.choice((10, 15, 20, 25, 30, 40, 50, 75))
    base = _round_price_for(rng, percent, 600)
    variant = rng.randrange(3)
    if variant == 0:
        grown = Fraction(base * (100 + percent), 100)
        drop = rng.randint(1, int(grown) - 1)
        question = (
            f"{shop} sold {base} {things} in March. In April it sold {percent}% more than in "
            f"March, and in May it sold {drop} fewer than in April. How many {things} were sold "
            f"in May?"
        )
        return _Draft(question, f"{base}*(100+{percent})/100-{drop}", grown - drop)
    if variant == 1:
        question = (
            f"{shop} sold {base} {things} in its first month and {percent}% more in its second "
            f"month. How many {things} did it sell over the two months?"
        )
        return _Draft(
            question,
            f"{base}+{base}*(100+{percent})/100",
            base + Fraction(base * (100 + percent), 100),
        )
    rise = rng.randint(5, 80)
    question = (
        f"{shop} sold {base} {things} last week. This week sales fell by {percent}%, but "
        f"then a late order added {rise} more. How many {things} were sold this week?"
    )
    return _Draft(
        question,
        f"{base}*(100-{percent})/100+{rise}",
        Fraction(base * (100 - percent), 100) + rise,
    )


_BAGGED = ("rice", "flour", "potatoes", "dog food", "bird seed", "sugar", "apples")


def _hard_bulk_bag_savings(rng: random.Random) -> _Draft:
    name = rng.choice(_NAMES)
    product = rng.choice(_BAGGED)
    cheap_store, dear_store = rng.sample(_STORES, 2)
    while True:
        cheap_size, dear_size = rng.sample((2, 3, 4, 5, 6, 8, 10), 2)
        common = math.lcm(cheap_size, dear_size)
        if common <= 60:
            break
    needed = common * rng.randint(1, max(1, 120 // common))
    cheap_unit = Fraction(rng.randint(4, 40), 4)  # per kg, whole quarters of a dollar
    dear_unit = cheap_unit + Fraction(rng.randint(1, 12), 4)
    cheap_price, dear_price = cheap_unit * cheap_size, dear_unit * dear_size
    question = (
        f"At {dear_store}, a {dear_size} kg bag of {product} costs {_money(dear_price)}. At "
        f"{cheap_store}, a {cheap_size} kg bag costs {_money(cheap_price)}. {name} needs "
        f"exactly {needed} kg and buys only whole bags from one store. How many dollars does "
        f"{name} save by shopping at {cheap_store}?",
        f"{name} needs {needed} kg of {product}. {cheap_store.capitalize()} sells "
        f"{cheap_size} kg bags for {_money(cheap_price)}; {dear_store} sells {dear_size} kg "
        f"bags for {_money(dear_price)}. Buying whole bags, how much cheaper, in dollars, is "
        f"{cheap_store}?",
    )
    return _Draft(
        question,
        f"{needed}/{dear_size}*{_num(dear_price)}-{needed}/{cheap_size}*{_num(cheap_price)}",
        needed * (dear_unit - cheap_unit),
    )


_TEMPLATES: dict[str, tuple[tuple[str, Template], ...]] = {
    "easy": (
        ("shopping_change", _easy_shopping_change),
        ("sharing_equally", _easy_sharing_equally),
        ("collection_growth", _easy_collection_growth),
        ("giving_away", _easy_giving_away),
        ("production_rate", _easy_production_rate),
        ("ages", _easy_ages),
        ("rectangle_area", _easy_rectangle_area),
        ("weekly_savings", _easy_weekly_savings),
        ("compare_difference", _easy_compare_difference),
        ("bus_passengers", _easy_bus_passengers),
    ),
    "medium": (
        ("shopping_change", _medium_shopping_change),
        ("sale_discount", _medium_sale_discount),
        ("sharing_after_eating", _medium_sharing_after_eating),
        ("two_leg_trip", _medium_two_leg_trip),
        ("ages_multiple", _medium_ages_multiple),
        ("savings_goal", _medium_savings_goal),
        ("recipe_scaling", _medium_recipe_scaling),
        ("fencing_cost", _medium_fencing_cost),
        ("workers_wages", _medium_workers_wages),
        ("giving_fraction", _medium_giving_fraction),
        ("unit_price_comparison", _medium_unit_price_comparison),
    ),
    "hard": (
        ("discount_and_change", _hard_discount_and_change),
        ("fraction_sharing", _hard_fraction_sharing),
        ("multi_leg_trip", _hard_multi_leg_trip),
        ("family_ages", _hard_family_ages),
        ("savings_after_spending", _hard_savings_after_spending),
        ("recipe_cost", _hard_recipe_cost),
        ("paint_walls", _hard_paint_walls),
        ("workers_join", _hard_workers_join),
        ("overtime_pay", _hard_overtime_pay),
        ("tank_fill", _hard_tank_fill),
        ("percent_change", _hard_percent_change),
        ("bulk_bag_savings", _hard_bulk_bag_savings),
    ),
}

# Per level: allowed operation counts and the largest number an expression may contain.
_OPERATIONS = {"easy": (1, 2), "medium": (2, 3), "hard": (3, 5)}
_LARGEST_NUMBER = {"easy": 99, "medium": 500, "hard": None}


def _check_draft(level: str, template: str, draft: _Draft) -> None:
    """Fail loudly on a template bug: the gold answer must be exact and match the expression."""
    problem = None
    if exact_value(draft.expression) != draft.answer:
        problem = f"expression {draft.expression!r} != answer {draft.answer}"
    elif draft.answer < 0:
        problem = f"negative answer {draft.answer}"
    elif not _cents_only(draft.answer) or (level != "hard" and draft.answer.denominator != 1):
        problem = f"answer {draft.answer} is not exact enough for {level}"
    elif not _OPERATIONS[level][0] <= _operation_count(draft.expression) <= _OPERATIONS[level][1]:
        problem = f"{_operation_count(draft.expression)} operations in {draft.expression!r}"
    else:
        numbers = [Fraction(n) for n in re.findall(r"\d+\.?\d*", draft.expression)]
        largest = _LARGEST_NUMBER[level]
        if largest is not None and max(numbers) > largest:
            problem = f"number above {largest} in {draft.expression!r}"
        if level == "easy" and any(not 10 <= n <= 99 for n in numbers):
            problem = f"non-two-digit number in {draft.expression!r}"
    if problem is not None:
        raise RuntimeError(f"math template {level}/{template} produced a bad task: {problem}")


def _split_of(question: str) -> str:
    # Depends on the text alone, so a question keeps its split however the pool was drawn.
    return hash_split(question, test=1, out_of=10)


@functools.lru_cache(maxsize=32)
def _split_pools(level: str, seed: int) -> dict[str, tuple[MathTask, ...]]:
    rng = random.Random(f"{level}-{seed}")
    templates = _TEMPLATES[level]
    seen: set[str] = set()
    tasks: list[MathTask] = []
    for _ in range(POOL_SIZE * _MAX_DRAWS_PER_TASK):
        if len(tasks) >= POOL_SIZE:
            break
        template, build = rng.choice(templates)
        draft = build(rng)
        if not isinstance(draft.question, str):
            draft = replace(draft, question=rng.choice(draft.question))
        if draft.question in seen:
            continue
        _check_draft(level, template, draft)
        seen.add(draft.question)
        tasks.append(
            MathTask(
                task_id=f"{level}-{short_digest(draft.question)}",
                question=draft.question,
                answer=canonical_number(draft.answer),
                expression=draft.expression,
                level=level,
                template=template,
            )
        )
    return {
        split: tuple(task for task in tasks if _split_of(task.question) == split)
        for split in SPLITS
    }


def generate_tasks(level: str = "easy", split: str = "train", *, seed: int = 0) -> list[MathTask]:
    """Seeded synthetic word problems for one level and split.

    Args:
        level: ``"easy"``, ``"medium"`` or ``"hard"``.
        split: ``"train"`` (~90%) or ``"test"`` (~10%), disjoint as question texts.
        seed: Pool seed; the same (level, split, seed) always gives the same list.

    Returns:
        A new list of :class:`MathTask` (cached internally; safe to mutate).

    Raises:
        DatasetError: for an unknown level or split (the message lists the valid ones).
    """
    check_choice("level", level, LEVELS)
    check_choice("split", split, SPLITS)
    return list(_split_pools(level, int(seed))[split])
