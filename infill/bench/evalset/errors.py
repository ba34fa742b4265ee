"""Execution-checked functions: error handling and iteration. Each is followed by its asserts."""

import itertools


def _raises(error, function, *args):
    try:
        function(*args)
    except error:
        return True
    return False


def _message(error, function, *args):
    try:
        function(*args)
    except error as caught:
        return str(caught)
    return None


def safe_divide(a, b, default=None):
    """a / b, or `default` when b is zero."""
    try:
        return a / b
    except ZeroDivisionError:
        return default


assert safe_divide(6, 3) == 2.0
assert safe_divide(1, 0) is None
assert safe_divide(1, 0, default=0) == 0


def int_or(text, default=0):
    """The integer written in `text`, or `default` if it is not one."""
    try:
        return int(text)
    except (TypeError, ValueError):
        return default


assert int_or("42") == 42
assert int_or("4.2", -1) == -1
assert int_or(None) == 0


def retry(function, attempts):
    """Call `function` up to `attempts` times; return its first result, or re-raise the last error."""
    for attempt in range(attempts):
        try:
            return function()
        except Exception:
            if attempt == attempts - 1:
                raise


_calls = iter([ValueError("1"), ValueError("2"), "ok"])


def _flaky():
    outcome = next(_calls)
    if isinstance(outcome, Exception):
        raise outcome
    return outcome


assert retry(_flaky, 3) == "ok"
assert _raises(ZeroDivisionError, retry, lambda: 1 / 0, 2)


def check_username(name):
    """Return the name if it is 3-16 letters, digits or underscores, not starting with a digit;
    otherwise raise ValueError saying what is wrong."""
    if not 3 <= len(name) <= 16:
        raise ValueError("a username has 3 to 16 characters")
    if name[0].isdigit():
        raise ValueError("a username cannot start with a digit")
    if not all(char.isalnum() or char == "_" for char in name):
        raise ValueError("a username has only letters, digits and underscores")
    return name


assert check_username("ada_99") == "ada_99"
assert _raises(ValueError, check_username, "ab")
assert _raises(ValueError, check_username, "9lives")
assert _raises(ValueError, check_username, "no spaces")


def typed_setting(settings, key, kind):
    """settings[key] converted with `kind`; KeyError if missing, TypeError if it will not convert."""
    if key not in settings:
        raise KeyError(f"missing setting {key!r}")
    try:
        return kind(settings[key])
    except (TypeError, ValueError) as error:
        raise TypeError(f"setting {key!r} is not a {kind.__name__}") from error


assert typed_setting({"port": "8080"}, "port", int) == 8080
assert _raises(KeyError, typed_setting, {}, "port", int)
assert _raises(TypeError, typed_setting, {"port": "http"}, "port", int)


def first_valid(values, check):
    """The first value for which `check(value)` does not raise, or None."""
    for value in values:
        try:
            check(value)
        except Exception:
            continue
        return value
    return None


assert first_valid(["x", "7", "8"], int) == "7"
assert first_valid(["a", "b"], int) is None
assert first_valid([], int) is None


def average(values):
    """Mean of the values; ValueError for an empty sequence."""
    if not values:
        raise ValueError("average of nothing")
    return sum(values) / len(values)


assert average([1, 2, 3, 4]) == 2.5
assert _raises(ValueError, average, [])


def error_names(functions):
    """Call each function; the name of the exception it raised, or None if it returned."""
    names = []
    for function in functions:
        try:
            function()
            names.append(None)
        except Exception as error:
            names.append(type(error).__name__)
    return names


assert error_names([lambda: 1, lambda: [][1], lambda: {}["k"], lambda: int("x")]) == [
    None,
    "IndexError",
    "KeyError",
    "ValueError",
]
assert error_names([]) == []


def item_at(items, index, default=None):
    """items[index], or `default` when the index is out of range."""
    try:
        return items[index]
    except IndexError:
        return default


assert item_at([1, 2, 3], 1) == 2
assert item_at([1, 2, 3], 5, "none") == "none"
assert item_at([1, 2, 3], -1) == 3


def require(data, keys):
    """Raise KeyError naming every missing key (sorted, comma-separated); else return data."""
    missing = sorted(key for key in keys if key not in data)
    if missing:
        raise KeyError(", ".join(missing))
    return data


assert require({"a": 1, "b": 2}, ["a"]) == {"a": 1, "b": 2}
assert _raises(KeyError, require, {"a": 1}, ["c", "b", "a"])
assert _message(KeyError, require, {"a": 1}, ["c", "b", "a"]) == "'b, c'"


def convert_numbers(texts):
    """(the texts that are numbers, converted to float; the texts that are not)."""
    numbers, rejected = [], []
    for text in texts:
        try:
            numbers.append(float(text))
        except ValueError:
            rejected.append(text)
    return numbers, rejected


assert convert_numbers(["1", "2.5", "x", "-3"]) == ([1.0, 2.5, -3.0], ["x"])
assert convert_numbers([]) == ([], [])


def batched_sums(values, size):
    """Sums of consecutive groups of `size` values (the last group may be smaller)."""
    iterator = iter(values)
    sums = []
    while batch := list(itertools.islice(iterator, size)):
        sums.append(sum(batch))
    return sums


assert batched_sums(range(1, 8), 3) == [6, 15, 7]
assert batched_sums([], 2) == []
assert batched_sums([5], 4) == [5]


def increasing_prefix(values):
    """The longest prefix of `values` in which each value is larger than the one before."""
    prefix = []
    for value in values:
        if prefix and value <= prefix[-1]:
            break
        prefix.append(value)
    return prefix


assert increasing_prefix([1, 3, 7, 7, 9]) == [1, 3, 7]
assert increasing_prefix([5, 4]) == [5]
assert increasing_prefix([]) == []


def zip_padded(first, second, fill=None):
    """Pairs of items from both lists; the shorter one is padded with `fill`."""
    size = max(len(first), len(second))
    first = list(first) + [fill] * (size - len(first))
    second = list(second) + [fill] * (size - len(second))
    return list(zip(first, second))


assert zip_padded([1, 2, 3], "ab") == [(1, "a"), (2, "b"), (3, None)]
assert zip_padded([], [0], fill=-1) == [(-1, 0)]
assert zip_padded([], []) == []


def cycle_take(items, count):
    """The first `count` items of `items` repeated forever."""
    if not items:
        return []
    return [items[i % len(items)] for i in range(count)]


assert cycle_take([1, 2, 3], 7) == [1, 2, 3, 1, 2, 3, 1]
assert cycle_take([], 3) == []
assert cycle_take("ab", 0) == []


def number_lines(lines, start=1):
    """Each line prefixed with its number, right-aligned to the widest number, and ": "."""
    width = len(str(start + len(lines) - 1))
    return [f"{number:>{width}}: {line}" for number, line in enumerate(lines, start)]


assert number_lines(["a", "b"]) == ["1: a", "2: b"]
assert number_lines(["x"] * 10)[0] == " 1: x"
assert number_lines([], 5) == []


def pairs_in_order(items):
    """Every pair (a, b) of items where a comes before b in the list."""
    return [(items[i], items[j]) for i in range(len(items)) for j in range(i + 1, len(items))]


assert pairs_in_order([1, 2, 3]) == [(1, 2), (1, 3), (2, 3)]
assert pairs_in_order(["solo"]) == []
