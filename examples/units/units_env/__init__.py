"""examples/units-v0: unit conversion with a tool (rows from make_rows.py), a TaskEnv."""

from pathlib import Path

from boltzoo.envs import TaskEnv
from boltzoo.rewards.math import extract_answer, numbers_match

# each unit's size in its kind's base unit (metre, gram, second, litre, square metre, m/s)
KINDS = {
    "length": "mm=0.001 cm=0.01 m=1 km=1000 in=0.0254 ft=0.3048 yd=0.9144 mi=1609.344 nmi=1852",
    "mass": "mg=0.001 g=1 kg=1000 t=1000000 oz=28.349523 lb=453.59237 st=6350.29318",
    "time": "s=1 min=60 h=3600 day=86400 wk=604800",
    "volume": "ml=0.001 l=1 tsp=0.004929 tbsp=0.014787 cup=0.236588 pt=0.473176 gal=3.785412",
    "area": "m2=1 km2=1000000 ha=10000 acre=4046.856 ft2=0.092903",
    "speed": "mps=1 kph=0.277778 mph=0.44704 knot=0.514444",
}
UNITS = {u: (kind, float(size)) for kind, row in KINDS.items() for u, size in
         (pair.split("=") for pair in row.split())}


def convert(value: float, from_unit: str, to_unit: str) -> float:
    """Convert a value between two units of a kind: mm cm m km in ft yd mi nmi; mg g kg t oz lb
    st; s min h day wk; ml l tsp tbsp cup pt gal; m2 km2 ha acre ft2; mps kph mph knot."""
    (kind, size), (to_kind, to_size) = UNITS[from_unit], UNITS[to_unit]
    if kind != to_kind:
        raise ValueError(f"cannot convert {kind} to {to_kind}")
    return float(f"{value * size / to_size:.6g}")


def correct(parsed, answer):
    return float(numbers_match(parsed, str(answer), rel_tol=1e-3))


def env(**kwargs):
    rows = {split: Path(__file__).parent / f"{split}.jsonl" for split in ("train", "test")}
    system = "You convert units with the convert tool."
    return TaskEnv(tasks=rows, system=system, prompt="{question}", tools=[convert],
                   parser=extract_answer, reward=correct, oracle="solution", **kwargs)
