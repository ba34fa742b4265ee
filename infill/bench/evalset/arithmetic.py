"""Execution-checked functions: arithmetic and numbers. Each is followed by its asserts."""

import math


def clamp(value, low, high):
    """`value` limited to the range [low, high]."""
    return max(low, min(high, value))


assert clamp(5, 0, 10) == 5
assert clamp(-3, 0, 10) == 0
assert clamp(12.5, 0, 10) == 10


def gcd_of(numbers):
    """Greatest common divisor of a list of integers (0 for an empty list)."""
    result = 0
    for number in numbers:
        result = math.gcd(result, number)
    return result


assert gcd_of([12, 18, 30]) == 6
assert gcd_of([7]) == 7
assert gcd_of([]) == 0


def is_prime(n):
    """Whether the integer `n` is prime."""
    if n < 2:
        return False
    for divisor in range(2, math.isqrt(n) + 1):
        if n % divisor == 0:
            return False
    return True


assert [n for n in range(20) if is_prime(n)] == [2, 3, 5, 7, 11, 13, 17, 19]
assert not is_prime(-7)
assert is_prime(7919)


def digit_sum(n):
    """Sum of the decimal digits of the integer `n` (its sign is ignored)."""
    return sum(int(digit) for digit in str(abs(n)))


assert digit_sum(1234) == 10
assert digit_sum(-45) == 9
assert digit_sum(0) == 0


def mean_and_spread(values):
    """(mean, population standard deviation) of a non-empty list of numbers."""
    mean = sum(values) / len(values)
    variance = sum((v - mean) ** 2 for v in values) / len(values)
    return mean, math.sqrt(variance)


assert mean_and_spread([2, 4, 4, 4, 5, 5, 7, 9]) == (5.0, 2.0)
assert mean_and_spread([3]) == (3.0, 0.0)


def middle_value(values):
    """Median of a non-empty list: the middle value, or the mean of the two middle ones."""
    ordered = sorted(values)
    half = len(ordered) // 2
    if len(ordered) % 2:
        return ordered[half]
    return (ordered[half - 1] + ordered[half]) / 2


assert middle_value([5, 1, 3]) == 3
assert middle_value([4, 1, 2, 3]) == 2.5
assert middle_value([7]) == 7


def lerp(start, end, fraction):
    """The point `fraction` of the way from `start` to `end`."""
    return start + (end - start) * fraction


assert lerp(0, 10, 0.25) == 2.5
assert lerp(5, -5, 1) == -5
assert lerp(2, 4, 0) == 2


def round_to_multiple(value, step):
    """`value` rounded to the nearest multiple of `step` (halves round up)."""
    return math.floor(value / step + 0.5) * step


assert round_to_multiple(7, 5) == 5
assert round_to_multiple(8, 5) == 10
assert round_to_multiple(12.5, 5) == 15
assert round_to_multiple(-2, 4) == 0


def percent_change(old, new):
    """Change from `old` to `new` in percent, rounded to one decimal; None if `old` is 0."""
    if old == 0:
        return None
    return round((new - old) / abs(old) * 100, 1)


assert percent_change(50, 75) == 50.0
assert percent_change(200, 150) == -25.0
assert percent_change(0, 10) is None
assert percent_change(3, 4) == 33.3


def from_binary(bits):
    """The integer a string of 0s and 1s stands for (without calling int(bits, 2))."""
    value = 0
    for bit in bits:
        value = value * 2 + (bit == "1")
    return value


assert from_binary("1011") == 11
assert from_binary("0") == 0
assert from_binary("11111111") == 255


def human_size(size):
    """A byte count in binary units with one decimal: 1536 -> "1.5 KiB"; below 1024: "512 B"."""
    if size < 1024:
        return f"{size} B"
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        size /= 1024
        if size < 1024 or unit == "TiB":
            return f"{size:.1f} {unit}"


assert human_size(512) == "512 B"
assert human_size(1536) == "1.5 KiB"
assert human_size(3 * 1024**3) == "3.0 GiB"


def collatz_length(n):
    """How many steps of n -> n/2 (even) or 3n+1 (odd) it takes to reach 1."""
    steps = 0
    while n != 1:
        n = n // 2 if n % 2 == 0 else 3 * n + 1
        steps += 1
    return steps


assert collatz_length(1) == 0
assert collatz_length(6) == 8
assert collatz_length(27) == 111


def dot(u, v):
    """Dot product of two vectors of the same length."""
    return sum(a * b for a, b in zip(u, v))


assert dot([1, 2, 3], [4, 5, 6]) == 32
assert dot([], []) == 0
assert dot([1, -1], [1, 1]) == 0


def shares(values):
    """Each value as a fraction of the total (all zeros if the total is zero)."""
    total = sum(values)
    if total == 0:
        return [0.0 for _ in values]
    return [value / total for value in values]


assert shares([1, 1, 2]) == [0.25, 0.25, 0.5]
assert shares([0, 0]) == [0.0, 0.0]
assert shares([]) == []


def prime_factors(n):
    """Prime factors of n >= 2 in ascending order, with repetition."""
    factors, divisor = [], 2
    while n > 1:
        while n % divisor == 0:
            factors.append(divisor)
            n //= divisor
        divisor += 1
    return factors


assert prime_factors(360) == [2, 2, 2, 3, 3, 5]
assert prime_factors(13) == [13]
assert prime_factors(2) == [2]


def weighted_mean(values, weights):
    """Mean of `values` weighted by `weights`; ValueError if the weights sum to zero."""
    total = sum(weights)
    if total == 0:
        raise ValueError("weights sum to zero")
    return sum(v * w for v, w in zip(values, weights)) / total


assert weighted_mean([1, 2, 3], [1, 1, 2]) == 2.25
assert weighted_mean([10], [3]) == 10


def compound(principal, rate, years):
    """Balance after compounding `rate` (e.g. 0.05) once a year, rounded to cents."""
    balance = principal
    for _ in range(years):
        balance *= 1 + rate
    return round(balance, 2)


assert compound(1000, 0.05, 2) == 1102.5
assert compound(100, 0.1, 0) == 100
assert compound(250, 0.0, 10) == 250


def triangle_kind(a, b, c):
    """Classify a triangle by its sides: equilateral, isosceles, scalene, or invalid."""
    x, y, z = sorted((a, b, c))
    if x <= 0 or x + y <= z:
        return "invalid"
    if x == z:
        return "equilateral"
    return "isosceles" if x == y or y == z else "scalene"


assert triangle_kind(3, 3, 3) == "equilateral"
assert triangle_kind(5, 3, 5) == "isosceles"
assert triangle_kind(3, 4, 5) == "scalene"
assert triangle_kind(1, 2, 3) == "invalid"


def distance(p, q):
    """Euclidean distance between two points given as (x, y) tuples."""
    return math.hypot(q[0] - p[0], q[1] - p[1])


assert distance((0, 0), (3, 4)) == 5.0
assert distance((1, 1), (1, 1)) == 0.0
assert distance((-1, 0), (2, 4)) == 5.0


def digits_to_number(digits, base=10):
    """The integer whose digits, most significant first, are given in `base`."""
    value = 0
    for digit in digits:
        value = value * base + digit
    return value


assert digits_to_number([4, 2]) == 42
assert digits_to_number([1, 0, 1], base=2) == 5
assert digits_to_number([]) == 0
