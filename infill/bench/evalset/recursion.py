"""Execution-checked functions: recursion over numbers, lists and trees. Each is followed by its
asserts."""

import functools


def flatten(nested):
    """All the non-list items of arbitrarily nested lists, in order."""
    flat = []
    for item in nested:
        if isinstance(item, list):
            flat.extend(flatten(item))
        else:
            flat.append(item)
    return flat


assert flatten([1, [2, [3, [4]], 5], []]) == [1, 2, 3, 4, 5]
assert flatten([]) == []
assert flatten([[["deep"]]]) == ["deep"]


def factorial(n):
    """n! for n >= 0, recursively."""
    return 1 if n <= 1 else n * factorial(n - 1)


assert factorial(0) == 1
assert factorial(5) == 120
assert factorial(12) == 479001600


@functools.cache
def fibonacci(n):
    """The n-th Fibonacci number (0, 1, 1, 2, 3, ...), memoised."""
    if n < 2:
        return n
    return fibonacci(n - 1) + fibonacci(n - 2)


assert [fibonacci(n) for n in range(8)] == [0, 1, 1, 2, 3, 5, 8, 13]
assert fibonacci(80) == 23416728348467685


def orderings(items):
    """Every ordering of the items (as lists), in lexicographic order of positions."""
    if len(items) <= 1:
        return [list(items)]
    result = []
    for i, item in enumerate(items):
        for rest in orderings(items[:i] + items[i + 1 :]):
            result.append([item] + rest)
    return result


assert orderings([1, 2, 3]) == [[1, 2, 3], [1, 3, 2], [2, 1, 3], [2, 3, 1], [3, 1, 2], [3, 2, 1]]
assert orderings([]) == [[]]
assert len(orderings(list("abcd"))) == 24


def subsets(items):
    """All subsets of the list, each keeping the items' order; the empty one first."""
    if not items:
        return [[]]
    rest = subsets(items[1:])
    return rest + [[items[0]] + subset for subset in rest]


assert sorted(subsets([1, 2, 3])) == [[], [1], [1, 2], [1, 2, 3], [1, 3], [2], [2, 3], [3]]
assert subsets([]) == [[]]
assert len(subsets(list(range(5)))) == 32


def find_sorted(items, target, low=0, high=None):
    """Index of `target` in the sorted list by recursive bisection, or -1."""
    high = len(items) - 1 if high is None else high
    if low > high:
        return -1
    middle = (low + high) // 2
    if items[middle] == target:
        return middle
    if items[middle] < target:
        return find_sorted(items, target, middle + 1, high)
    return find_sorted(items, target, low, middle - 1)


assert find_sorted([1, 3, 5, 7, 9, 11], 7) == 3
assert find_sorted([1, 3, 5], 4) == -1
assert find_sorted([], 1) == -1
assert find_sorted([2], 2) == 0


def nesting_depth(value):
    """How deeply lists are nested: 0 for a non-list, 1 for a flat list, and so on."""
    if not isinstance(value, list):
        return 0
    return 1 + max((nesting_depth(item) for item in value), default=0)


assert nesting_depth(5) == 0
assert nesting_depth([1, 2]) == 1
assert nesting_depth([1, [2, [3]], []]) == 3


def tree_total(node):
    """Sum of the "value" of a tree of {"value": n, "children": [...]} nodes."""
    return node["value"] + sum(tree_total(child) for child in node.get("children", []))


assert tree_total({"value": 1, "children": [{"value": 2}, {"value": 3, "children": [{"value": 4}]}]}) == 10
assert tree_total({"value": 7}) == 7


def hanoi(n, source="A", target="C", spare="B"):
    """The moves (from, to) that carry n disks from `source` to `target`."""
    if n == 0:
        return []
    return hanoi(n - 1, source, spare, target) + [(source, target)] + hanoi(n - 1, spare, target, source)


assert hanoi(1) == [("A", "C")]
assert hanoi(2) == [("A", "B"), ("A", "C"), ("B", "C")]
assert len(hanoi(6)) == 63


@functools.cache
def grid_paths(rows, columns):
    """Paths from the top-left to the bottom-right corner of a grid moving only right or down."""
    if rows == 1 or columns == 1:
        return 1
    return grid_paths(rows - 1, columns) + grid_paths(rows, columns - 1)


assert grid_paths(2, 2) == 2
assert grid_paths(3, 3) == 6
assert grid_paths(1, 9) == 1
assert grid_paths(10, 10) == 48620


def merge_sort(items):
    """A sorted copy of the list, by recursive merging."""
    if len(items) <= 1:
        return list(items)
    middle = len(items) // 2
    left, right = merge_sort(items[:middle]), merge_sort(items[middle:])
    merged = []
    while left and right:
        merged.append(left.pop(0) if left[0] <= right[0] else right.pop(0))
    return merged + left + right


assert merge_sort([5, 2, 9, 1, 5, 6]) == [1, 2, 5, 5, 6, 9]
assert merge_sort([]) == []
assert merge_sort([3, -1]) == [-1, 3]


def sum_leaves(data):
    """Sum of all numbers in nested dicts and lists."""
    if isinstance(data, dict):
        return sum(sum_leaves(value) for value in data.values())
    if isinstance(data, list):
        return sum(sum_leaves(item) for item in data)
    return data if isinstance(data, (int, float)) else 0


assert sum_leaves({"a": 1, "b": {"c": [2, 3], "d": "skip"}}) == 6
assert sum_leaves([]) == 0
assert sum_leaves(4.5) == 4.5


def combinations_summing_to(values, target):
    """Every combination of the (positive) values, in order, that sums to `target`."""
    if target == 0:
        return [[]]
    if not values or target < 0:
        return []
    first, rest = values[0], values[1:]
    with_first = [[first] + combo for combo in combinations_summing_to(rest, target - first)]
    return with_first + combinations_summing_to(rest, target)


assert combinations_summing_to([2, 3, 5, 7], 10) == [[2, 3, 5], [3, 7]]
assert combinations_summing_to([1, 2], 4) == []
assert combinations_summing_to([], 0) == [[]]


def root_to_leaf(tree, path=()):
    """Every path of names from the root to a leaf of a {"name": ..., "children": [...]} tree."""
    path = path + (tree["name"],)
    children = tree.get("children", [])
    if not children:
        return [list(path)]
    return [found for child in children for found in root_to_leaf(child, path)]


_tree = {"name": "a", "children": [{"name": "b"}, {"name": "c", "children": [{"name": "d"}]}]}
assert root_to_leaf(_tree) == [["a", "b"], ["a", "c", "d"]]
assert root_to_leaf({"name": "solo"}) == [["solo"]]


def power(base, exponent):
    """base ** exponent for an integer exponent >= 0, by repeated squaring."""
    if exponent == 0:
        return 1
    half = power(base, exponent // 2)
    return half * half * (base if exponent % 2 else 1)


assert power(2, 10) == 1024
assert power(3, 0) == 1
assert power(5, 3) == 125


def count_change(amount, coins):
    """In how many ways `amount` can be paid with the given coin values (order does not matter)."""
    if amount == 0:
        return 1
    if amount < 0 or not coins:
        return 0
    return count_change(amount - coins[0], coins) + count_change(amount, coins[1:])


assert count_change(10, [1, 5, 10]) == 4
assert count_change(3, [2]) == 0
assert count_change(0, []) == 1
