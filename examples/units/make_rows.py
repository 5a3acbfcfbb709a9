"""Write examples/units' rows: train.jsonl (400) and test.jsonl (100), disjoint, seeded.

    python examples/units/make_rows.py

Each row: ``id``, ``question``, ``answer`` (the gold number), ``kind`` (length, mass, time,
volume) and ``solution`` (the oracle's two turns: the tool call, then the answer).
"""

import json
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from units_env import UNITS, convert  # noqa: E402

NAMES = {  # unit: the words questions use for it (plural)
    "mm": "millimetres", "cm": "centimetres", "m": "metres", "km": "kilometres",
    "in": "inches", "ft": "feet", "yd": "yards", "mi": "miles", "nmi": "nautical miles",
    "mg": "milligrams", "g": "grams", "kg": "kilograms", "t": "tonnes", "oz": "ounces",
    "lb": "pounds", "st": "stone", "s": "seconds", "min": "minutes", "h": "hours",
    "day": "days", "wk": "weeks", "ml": "millilitres", "l": "litres", "tsp": "teaspoons",
    "tbsp": "tablespoons", "cup": "cups", "pt": "pints", "gal": "gallons",
    "m2": "square metres", "km2": "square kilometres", "ha": "hectares", "acre": "acres",
    "ft2": "square feet", "mps": "metres per second", "kph": "kilometres per hour",
    "mph": "miles per hour", "knot": "knots",
}  # fmt: skip
THINGS = {"length": "trail", "mass": "parcel", "time": "trip", "volume": "jug", "area": "field",
          "speed": "boat"}  # fmt: skip
PHRASINGS = (
    "Convert {value} {source} to {target}.",
    "How many {target} are in {value} {source}?",
    "A {thing} measures {value} {source}. How much is that in {target}?",
    "What is {value} {source} in {target}?",
    "Express {value} {source} in {target}.",
)


def rows(count: int, rng: random.Random, taken: set[str]) -> list[dict]:
    """Return ``count`` new rows whose answers lie in [0.01, 100000] (no scientific notation)."""
    out = []
    while len(out) < count:
        kind = rng.choice(sorted(THINGS))
        source, target = rng.sample([u for u, (k, _) in UNITS.items() if k == kind], 2)
        value = rng.choice([rng.randint(1, 500), round(rng.uniform(0.5, 99), 1)])
        if not 0.01 <= convert(value, source, target) <= 1e5:
            continue
        question = rng.choice(PHRASINGS).format(
            value=f"{value:g}", source=NAMES[source], target=NAMES[target], thing=THINGS[kind]
        )
        if question in taken:
            continue
        taken.add(question)
        answer = convert(value, source, target)
        call = json.dumps({"value": value, "from_unit": source, "to_unit": target})
        solution = [f"<convert>{call}</convert>", f"The answer is {answer:g}."]
        out.append({"id": f"{kind}-{len(taken):04d}", "question": question, "answer": answer,
                    "kind": kind, "solution": solution})  # fmt: skip
    return out


if __name__ == "__main__":
    rng, taken = random.Random(0), set()
    for split, count in (("test", 100), ("train", 400)):
        path = Path(__file__).parent / "units_env" / f"{split}.jsonl"
        path.write_text("".join(json.dumps(row) + "\n" for row in rows(count, rng, taken)))
        print(f"wrote {count} rows to {path}")
