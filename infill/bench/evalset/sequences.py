"""Execution-checked functions: lists and other sequences. Each is followed by its asserts."""


def chunk(items, size):
    """Split `items` into lists of `size` items; the last one may be shorter."""
    return [items[i : i + size] for i in range(0, len(items), size)]


assert chunk([1, 2, 3, 4, 5], 2) == [[1, 2], [3, 4], [5]]
assert chunk([], 3) == []
assert chunk("abcd", 2) == ["ab", "cd"]


def flatten_once(lists):
    """Concatenate a list of lists into one list."""
    return [item for inner in lists for item in inner]


assert flatten_once([[1, 2], [], [3]]) == [1, 2, 3]
assert flatten_once([]) == []
assert flatten_once([["a"], ["b", ["c"]]]) == ["a", "b", ["c"]]


def rotate(items, steps):
    """Rotate a list to the right by `steps` places (negative: to the left)."""
    if not items:
        return []
    steps %= len(items)
    return items[-steps:] + items[:-steps]


assert rotate([1, 2, 3, 4], 1) == [4, 1, 2, 3]
assert rotate([1, 2, 3, 4], -1) == [2, 3, 4, 1]
assert rotate([1, 2, 3], 6) == [1, 2, 3]
assert rotate([], 2) == []


def moving_average(values, window):
    """Mean of each run of `window` consecutive values."""
    total = sum(values[:window])
    averages = [total / window] if len(values) >= window else []
    for i in range(window, len(values)):
        total += values[i] - values[i - window]
        averages.append(total / window)
    return averages


assert moving_average([1, 2, 3, 4, 5], 2) == [1.5, 2.5, 3.5, 4.5]
assert moving_average([2, 4, 6], 3) == [4.0]
assert moving_average([1], 2) == []


def differences(values):
    """Each value minus the one before it."""
    return [b - a for a, b in zip(values, values[1:])]


assert differences([1, 4, 9, 16]) == [3, 5, 7]
assert differences([5]) == []
assert differences([3, 1]) == [-2]


def unique_in_order(items):
    """Items without repeats, each where it first appeared."""
    seen = set()
    out = []
    for item in items:
        if item not in seen:
            seen.add(item)
            out.append(item)
    return out


assert unique_in_order([3, 1, 3, 2, 1]) == [3, 1, 2]
assert unique_in_order("mississippi") == ["m", "i", "s", "p"]
assert unique_in_order([]) == []


def interleave(first, second):
    """Alternate items of the two lists; what is left of the longer one goes at the end."""
    out = []
    for a, b in zip(first, second):
        out += [a, b]
    shorter = min(len(first), len(second))
    return out + first[shorter:] + second[shorter:]


assert interleave([1, 2, 3], ["a", "b"]) == [1, "a", 2, "b", 3]
assert interleave([], [1, 2]) == [1, 2]
assert interleave(["x"], ["y"]) == ["x", "y"]


def second_largest(values):
    """The second largest distinct value, or None if there are fewer than two distinct values."""
    distinct = sorted(set(values), reverse=True)
    return distinct[1] if len(distinct) > 1 else None


assert second_largest([4, 9, 9, 2]) == 4
assert second_largest([7, 7]) is None
assert second_largest([-1, -5]) == -5


def running_max(values):
    """The largest value seen so far, at each position."""
    out = []
    for value in values:
        out.append(value if not out else max(out[-1], value))
    return out


assert running_max([3, 1, 4, 1, 5]) == [3, 3, 4, 4, 5]
assert running_max([]) == []
assert running_max([-2, -3]) == [-2, -2]


def split_by(items, predicate):
    """Two lists: the items for which `predicate` is true, and the others (order kept)."""
    yes, no = [], []
    for item in items:
        (yes if predicate(item) else no).append(item)
    return yes, no


assert split_by([1, 2, 3, 4, 5], lambda n: n % 2 == 0) == ([2, 4], [1, 3, 5])
assert split_by([], bool) == ([], [])
assert split_by(["a", "", "b"], bool) == (["a", "b"], [""])


def positions(items, target):
    """Every index at which `target` occurs in `items`."""
    return [index for index, item in enumerate(items) if item == target]


assert positions([1, 0, 1, 1], 1) == [0, 2, 3]
assert positions("hello", "l") == [2, 3]
assert positions([], 5) == []


def merge_sorted(first, second):
    """Merge two sorted lists into one sorted list (stable: ties take `first`'s item first)."""
    out, i, j = [], 0, 0
    while i < len(first) and j < len(second):
        if second[j] < first[i]:
            out.append(second[j])
            j += 1
        else:
            out.append(first[i])
            i += 1
    return out + first[i:] + second[j:]


assert merge_sorted([1, 4, 9], [2, 3, 10, 11]) == [1, 2, 3, 4, 9, 10, 11]
assert merge_sorted([], [1]) == [1]
assert merge_sorted([2, 2], [2]) == [2, 2, 2]


def windows(items, size):
    """Every run of `size` consecutive items, as tuples."""
    return [tuple(items[i : i + size]) for i in range(len(items) - size + 1)]


assert windows([1, 2, 3, 4], 3) == [(1, 2, 3), (2, 3, 4)]
assert windows([1, 2], 3) == []
assert windows("abc", 1) == [("a",), ("b",), ("c",)]


def consecutive_runs(numbers):
    """Group sorted integers into runs of consecutive values."""
    runs = []
    for number in numbers:
        if runs and number == runs[-1][-1] + 1:
            runs[-1].append(number)
        else:
            runs.append([number])
    return runs


assert consecutive_runs([1, 2, 3, 5, 7, 8]) == [[1, 2, 3], [5], [7, 8]]
assert consecutive_runs([]) == []
assert consecutive_runs([4]) == [[4]]


def describe_ranges(numbers):
    """Sorted integers as compact text: `[1, 2, 3, 5, 7, 8]` -> `"1-3,5,7-8"`."""
    parts = []
    start = previous = None
    for number in numbers + [None]:
        if previous is not None and number != previous + 1:
            parts.append(str(start) if start == previous else f"{start}-{previous}")
            start = None
        start = number if start is None else start
        previous = number
    return ",".join(parts)


assert describe_ranges([1, 2, 3, 5, 7, 8]) == "1-3,5,7-8"
assert describe_ranges([4]) == "4"
assert describe_ranges([]) == ""


def transpose(matrix):
    """Rows become columns: `[[1, 2], [3, 4]]` -> `[[1, 3], [2, 4]]`."""
    return [list(column) for column in zip(*matrix)]


assert transpose([[1, 2, 3], [4, 5, 6]]) == [[1, 4], [2, 5], [3, 6]]
assert transpose([]) == []
assert transpose([[7]]) == [[7]]


def unique_by(items, key):
    """The first item for each distinct `key(item)`, in order."""
    seen = set()
    out = []
    for item in items:
        marker = key(item)
        if marker not in seen:
            seen.add(marker)
            out.append(item)
    return out


assert unique_by(["apple", "avocado", "banana", "blueberry", "cherry"], lambda s: s[0]) == [
    "apple",
    "banana",
    "cherry",
]
assert unique_by([3, -3, 4], abs) == [3, 4]


def split_on(items, separator=None):
    """Split a list into the runs between occurrences of `separator`."""
    groups = [[]]
    for item in items:
        if item == separator:
            groups.append([])
        else:
            groups[-1].append(item)
    return groups


assert split_on([1, 2, None, 3, None, None, 4]) == [[1, 2], [3], [], [4]]
assert split_on([]) == [[]]
assert split_on(["a", "|", "b"], "|") == [["a"], ["b"]]


def cumulative(values):
    """Running totals of `values`."""
    totals, total = [], 0
    for value in values:
        total += value
        totals.append(total)
    return totals


assert cumulative([1, 2, 3, 4]) == [1, 3, 6, 10]
assert cumulative([]) == []
assert cumulative([5, -5]) == [5, 0]


def most_frequent(items):
    """The item that occurs most often; of equally frequent ones, the one seen first."""
    counts = {}
    for item in items:
        counts[item] = counts.get(item, 0) + 1
    return max(counts, key=counts.get) if counts else None


assert most_frequent([1, 2, 2, 3, 3]) == 2
assert most_frequent("abracadabra") == "a"
assert most_frequent([]) is None
