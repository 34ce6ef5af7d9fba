"""Self-checks for exercises and predict-first prompts.

A learner's answer starts as `None` (a placeholder) and is reported as "not attempted" instead of
raising, so a notebook with unanswered exercises still runs from top to bottom.
"""

from __future__ import annotations

import dataclasses
import math

NOT_ATTEMPTED, CORRECT, WRONG = "not attempted", "correct", "try again"
#: An exercise this run cannot score: the data its answer comes from is not shown (see `unavailable`).
NOTHING_TO_CHECK = "nothing to check against"
#: Default tolerance for numeric answers: 5% (answers come from reading plots and rounding).
DEFAULT_REL_TOL = 0.05


@dataclasses.dataclass(frozen=True)
class CheckResult:
    name: str
    status: str  # NOT_ATTEMPTED, CORRECT, WRONG or NOTHING_TO_CHECK
    message: str

    @property
    def passed(self) -> bool:
        return self.status == CORRECT

    def _repr_markdown_(self) -> str:
        mark = {CORRECT: "✅", WRONG: "❌", NOT_ATTEMPTED: "⬜", NOTHING_TO_CHECK: "➖"}[self.status]
        return f"{mark} **{self.name}**: {self.status} — {self.message}"

    def __str__(self) -> str:
        return f"[{self.status}] {self.name}: {self.message}"


def unavailable(name: str, why: str) -> CheckResult:
    """An exercise or prediction this run cannot score, saying why (e.g. the `reference=` chosen leaves out the
    system it asks about): shown and recorded like any check, instead of left out in silence."""
    return CheckResult(name, NOTHING_TO_CHECK, why)


def numeric(
    name: str, answer, expected: float, *, rel_tol: float = DEFAULT_REL_TOL, unit: str = "", hint: str = ""
) -> CheckResult:
    """Check a number against the expected value within a relative tolerance."""
    if answer is None or answer is Ellipsis:
        return CheckResult(
            name, NOT_ATTEMPTED, f"replace the placeholder with your answer{f' (in {unit})' if unit else ''}"
        )
    try:
        value = float(answer)
    except (TypeError, ValueError):
        return CheckResult(name, WRONG, f"expected a number, got {answer!r}")
    if math.isclose(value, expected, rel_tol=rel_tol):
        return CheckResult(name, CORRECT, f"{value:g} {unit} is within {rel_tol:.0%} of {expected:.4g} {unit}".strip())
    direction = "high" if value > expected else "low"
    return CheckResult(name, WRONG, f"{value:g} {unit} is too {direction}. {hint}".strip())


def choice(name: str, answer, expected, *, hint: str = "") -> CheckResult:
    """Check a categorical answer (string compared case-insensitively, or any equal value)."""
    if answer is None or answer is Ellipsis:
        return CheckResult(name, NOT_ATTEMPTED, "replace the placeholder with your answer")
    norm = (lambda x: x.strip().lower()) if isinstance(expected, str) and isinstance(answer, str) else (lambda x: x)
    if norm(answer) == norm(expected):
        return CheckResult(name, CORRECT, f"{answer!r} is right")
    return CheckResult(name, WRONG, f"{answer!r} is not it. {hint}".strip())


def predict_score(name: str, guess, measured: float, unit: str = "") -> CheckResult:
    """Score a predict-first guess: how many times off (factor) the guess was from the measurement."""
    if guess is None or guess is Ellipsis:
        return CheckResult(name, NOT_ATTEMPTED, "write your prediction before running the measurement")
    g = float(guess)
    if g <= 0 or measured <= 0:
        return CheckResult(name, WRONG, "predictions and measurements are positive numbers")
    factor = max(g / measured, measured / g)
    status = CORRECT if factor <= 2 else WRONG
    return CheckResult(
        name,
        status,
        f"you guessed {g:.4g} {unit}, measured {measured:.4g} {unit}: off by ×{factor:.2f}"
        + (" — within a factor of 2" if status == CORRECT else ""),
    )
