"""Small Python modules shared by several test files."""

# Two functions, one with a docstring: for the engine, repair and alternatives.
AREA_MODULE = (
    "import math\n"
    "\n"
    "def area(width, height):\n"
    '    """Area of a rectangle."""\n'
    "    return width * height\n"
    "\n"
    "def circle(radius):\n"
    "    return math.pi * radius ** 2\n"
)

# Functions, a loop and a class: for the CLI through the real model.
COUNTER_MODULE = '''import math


def circle_area(radius):
    """Area of a circle."""
    return math.pi * radius ** 2


def mean(values):
    total = 0
    for value in values:
        total += value
    return total / len(values)


class Counter:
    def __init__(self):
        self.count = 0

    def increment(self, step=1):
        self.count += step
        return self.count
'''

# What must never reach the user's text.
LEAKS = ("<mask>", "<null>", "<pad>", "<unk>", "<eos>", "░")


def generated_file(functions: int) -> str:
    """``functions`` ten-line functions without docstrings (2,000 of them: 20,000 lines)."""
    parts = []
    for index in range(functions):
        parts += [
            f"def step_{index}(value, scale={index % 7 + 1}):",
            f"    total = value * scale + {index}",
            "    if total > 0:",
            "        total = total // 2",
            "    else:",
            "        total = -total",
            "    for _ in range(3):",
            "        total += 1",
            "    return total",
            "",
        ]
    return "\n".join(parts) + "\n"
