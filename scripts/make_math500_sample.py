"""Write datasets/math500-sample/: test.jsonl (MATH-500 layout) and replay.jsonl.

Every problem is invented for this project. Each replayed agent runs Python in the sandbox
(run_python) and then answers; some answers are in an equivalent but different form (0.5 for
\\frac{1}{2}), some are deliberately wrong, so that the `math` scorer is exercised. The expected
verdicts are in tests/test_math500.py.

    python scripts/make_math500_sample.py
"""

from __future__ import annotations

import json
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "datasets" / "math500-sample"

# (unique_id, subject, level, problem, answer, code run in the sandbox, final answer text)
PROBLEMS: list[tuple[str, str, int | str, str, str, str, str]] = [
    ("test/prealgebra/1.json", "Prealgebra", 1, "Write $\\frac{3}{6}$ in lowest terms.", "\\frac{1}{2}",
     "from fractions import Fraction\nprint(float(Fraction(3, 6)))", "<solution>0.5</solution>"),
    ("test/prealgebra/2.json", "Prealgebra", "Level 1", "What is $2 + 3$?", "5",
     "print(2 + 3)", "The sum is $\\boxed{5}$."),
    ("test/prealgebra/3.json", "Prealgebra", 2, "Write $0.75$ as a common fraction.", "\\frac{3}{4}",
     "from fractions import Fraction\nprint(Fraction(0.75))", "<solution>0.75</solution>"),
    ("test/prealgebra/4.json", "Prealgebra", 2, "What percent of 80 is 20?", "25\\%",
     "print(20 / 80)", "<solution>0.25</solution>"),
    ("test/prealgebra/5.json", "Prealgebra", 2, "A shirt costing $\\$50$ is discounted by $\\$20$. "
     "By what percent was the price reduced?", "40\\%", "print(20 / 50 * 100)", "<solution>40</solution>"),
    ("test/geometry/6.json", "Geometry", 2, "A rectangle has area $36\\text{ cm}^2$ and width $3$ cm. "
     "What is its length, in centimeters?", "12\\text{ cm}", "print(36 / 3)", "<solution>12</solution>"),
    ("test/geometry/7.json", "Geometry", 1, "A square has perimeter 40 meters. How long is one side, in meters?",
     "10", "print(40 / 4)", "<solution>10 \\text{ meters}</solution>"),
    ("test/algebra/8.json", "Algebra", 3, "Find all $x$ with $2 \\le x$ and $x < 5$. Express your answer in "
     "interval notation.", "[2,5)", "print([x / 2 for x in range(4, 12)])", "<solution>[2,5]</solution>"),
    ("test/algebra/9.json", "Algebra", 3, "Solve $2x - 1 \\le 5$. Express your answer in interval notation.",
     "(-\\infty,3]", "print((5 + 1) / 2)", "<solution>(-\\infty, 3]</solution>"),
    ("test/algebra/10.json", "Algebra", 3, "What is the solution set of $x^2 - 3x + 2 = 0$?", "\\{1,2\\}",
     "print([x for x in range(-10, 11) if x * x - 3 * x + 2 == 0])", "<solution>\\{2, 1\\}</solution>"),
    ("test/algebra/11.json", "Algebra", 3, "Find all solutions of $x^2 - x - 6 = 0$, separated by commas.",
     "-2, 3", "print([x for x in range(-10, 11) if x * x - x - 6 == 0])", "<solution>3, -2</solution>"),
    ("test/algebra/12.json", "Algebra", 2, "Write $(x+1)(x+1)$ as a power of a binomial.", "(x+1)^2",
     "print([(x + 1) * (x + 1) - (x * x + 2 * x + 1) for x in range(5)])", "<solution>x^2+2x+1</solution>"),
    ("test/algebra/13.json", "Algebra", 2, "Expand $(x-1)(x+1)$.", "x^2-1",
     "print([(x - 1) * (x + 1) - (x * x - 1) for x in range(5)])", "<solution>(x+1)(x-1)</solution>"),
    ("test/number_theory/14.json", "Number Theory", 1, "What is the remainder when 15 is divided by 4?", "3",
     "print(15 // 4)", "<solution>4</solution>"),
    ("test/algebra/15.json", "Algebra", 2, "Simplify $\\sqrt{12}$.", "2\\sqrt{3}",
     "import math\nprint(math.sqrt(12), 2 * math.sqrt(3))", "<solution>\\sqrt{12}</solution>"),
    ("test/geometry/16.json", "Geometry", 2, "The angles of a triangle are in ratio $1:2:3$. What is the "
     "smallest angle, in degrees?", "30^\\circ", "print(180 / 6)", "<solution>30</solution>"),
    ("test/prealgebra/17.json", "Prealgebra", 2, "Tickets cost $\\$3.70$ each. How much do 5 tickets cost, "
     "in dollars?", "\\$18.50", "print(round(3.70 * 5, 2))", "<solution>18.5</solution>"),
    ("test/algebra/18.json", "Algebra", 3, "Solve the system $x + y = 1$, $x - y = 3$. Give the answer as "
     "an ordered pair $(x,y)$.", "(2,-1)", "print(((1 + 3) / 2, (1 - 3) / 2))", "<solution>(2, -1)</solution>"),
    ("test/counting_and_probability/19.json", "Counting & Probability", 2, "A fair die is rolled. What is "
     "the probability of rolling a 5 or a 6? Express your answer as a common fraction.", "\\frac{1}{3}",
     "print(round(2 / 6, 2))", "<solution>0.33</solution>"),
    ("test/geometry/20.json", "Geometry", 2, "What is the area of a circle of radius 2? Express your answer in "
     "terms of $\\pi$.", "4\\pi", "import math\nprint(math.pi * 2 ** 2 / math.pi)",
     "The area is $\\pi r^2 = \\boxed{4\\pi}$.\n<solution>The area is $\\boxed{4\\pi}$.</solution>"),
    ("test/precalculus/21.json", "Precalculus", 4, "Compute $\\begin{pmatrix} 1 & 0 \\\\ 0 & 1 \\end{pmatrix}"
     "\\begin{pmatrix} 2 \\\\ 3 \\end{pmatrix}$.", "\\begin{pmatrix} 2 \\\\ 3 \\end{pmatrix}",
     "import numpy as np\nprint(np.eye(2) @ np.array([2, 3]))",
     "<solution>\\begin{pmatrix}2\\\\3\\end{pmatrix}</solution>"),
    ("test/precalculus/22.json", "Precalculus", 3, "Which of the following equals $\\sin 30^\\circ$? "
     "(A) $0$ (B) $1$ (C) $\\frac{1}{2}$ (D) $2$. Enter the letter.", "\\text{(C)}",
     "import math\nprint(math.sin(math.radians(30)))", "<solution>C</solution>"),
    ("test/algebra/23.json", "Algebra", 1, "Solve $4x = 12$.", "3", "print(12 / 4)", "<solution>x = 3</solution>"),
    ("test/number_theory/24.json", "Number Theory", 2, "What is the least common multiple of 4 and 8?", "8",
     "import math\nprint(math.lcm(4, 8))", "<solution>I first thought $\\boxed{4}$, but the LCM is "
     "$\\boxed{8}$.</solution>"),
    ("test/algebra/25.json", "Algebra", 2, "Solve $2x = 7$.", "\\frac{7}{2}", "print(7 / 2)",
     "<solution>The answer is 7/2</solution>"),
    ("test/algebra/26.json", "Algebra", 3, "Write $x^2 + 2x + 1$ as the square of a binomial.", "(x+1)^2",
     "print([(x + 2) ** 2 for x in range(3)])", "<solution>(x+2)^2</solution>"),
    ("test/intermediate_algebra/27.json", "Intermediate Algebra", 5, "Find the number of positive divisors of "
     "$2^{10} \\cdot 3^{4}$.", "55", "print((10 + 1) * (4 + 1))", "<solution>I could not finish this "
     "one.</solution>"),
]


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    rows, replay = [], []
    for uid, subject, level, problem, answer, code, final in PROBLEMS:
        rows.append({"problem": problem, "solution": f"Computing gives $\\boxed{{{answer}}}$.", "answer": answer,
                     "subject": subject, "level": level, "unique_id": uid})
        replay.append({"instance_id": uid, "turns": [
            {"tool_calls": [{"name": "run_python", "arguments": {"code": code}}],
             "usage": {"prompt_tokens": 300, "completion_tokens": 40}},
            {"content": final, "usage": {"prompt_tokens": 380, "completion_tokens": 20}}]})
    (OUT / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (OUT / "replay.jsonl").write_text("".join(json.dumps(r) + "\n" for r in replay))
    print(f"wrote {len(rows)} problems to {OUT}")


if __name__ == "__main__":
    main()
