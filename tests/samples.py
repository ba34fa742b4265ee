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
