"""Reward functions: small composable callables that score a model reply, each returning a float.

Every reward takes the reply text (and the gold answer where there is one) and returns a
``float``, usually 0.0/1.0 (or a weight), so rewards can be summed or weighted freely, e.g.
``numeric_answer_reward(text, gold) + format_reward(text)``. They are pure Python (standard
library only), deterministic, and never raise on odd model output.

Modules:

* :mod:`boltzoo.rewards.math`: numeric answer extraction (``\\boxed{}``, ``####``, ``Answer:``),
  number parsing (fractions, percents, thousands commas, LaTeX) and tolerant matching;
* :mod:`boltzoo.rewards.qa`: SQuAD-style normalisation, exact match and token F1 over aliases;
* :mod:`boltzoo.rewards.format`: final-answer presence and tool-call tag checks.
"""

from .format import format_reward, has_final_answer, tool_calls_well_formed
from .math import (
    extract_answer,
    extract_final_answer,
    is_percent,
    numbers_match,
    numeric_answer_reward,
    parse_number,
)
from .qa import (
    best_score,
    exact_match,
    extract_short_answer,
    normalize_answer,
    qa_scores,
    token_f1,
)

__all__ = [
    # math
    "extract_final_answer",
    "extract_answer",
    "parse_number",
    "is_percent",
    "numbers_match",
    "numeric_answer_reward",
    # qa
    "normalize_answer",
    "exact_match",
    "token_f1",
    "best_score",
    "qa_scores",
    "extract_short_answer",
    # format
    "has_final_answer",
    "tool_calls_well_formed",
    "format_reward",
]
