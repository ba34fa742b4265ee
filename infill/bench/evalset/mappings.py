"""Execution-checked functions: dictionaries. Each is followed by the asserts that check it."""


def invert(mapping):
    """{value: sorted list of the keys that map to it}."""
    inverted = {}
    for key, value in mapping.items():
        inverted.setdefault(value, []).append(key)
    return {value: sorted(keys) for value, keys in inverted.items()}


assert invert({"a": 1, "b": 2, "c": 1}) == {1: ["a", "c"], 2: ["b"]}
assert invert({}) == {}


def add_counts(first, second):
    """Sum two {key: count} dicts key by key."""
    total = dict(first)
    for key, count in second.items():
        total[key] = total.get(key, 0) + count
    return total


assert add_counts({"a": 1, "b": 2}, {"b": 3, "c": 4}) == {"a": 1, "b": 5, "c": 4}
assert add_counts({}, {"x": 1}) == {"x": 1}
assert add_counts({"y": 2}, {}) == {"y": 2}


def dig(data, path, default=None):
    """Follow a dotted path of keys into nested dicts: `dig(d, "a.b.c")`; `default` if it breaks."""
    current = data
    for key in path.split("."):
        if not isinstance(current, dict) or key not in current:
            return default
        current = current[key]
    return current


assert dig({"a": {"b": {"c": 3}}}, "a.b.c") == 3
assert dig({"a": {"b": 1}}, "a.x", "none") == "none"
assert dig({"a": 5}, "a.b") is None
assert dig({"a": {"b": 2}}, "a") == {"b": 2}


def group_by(items, key):
    """{key(item): [items with that key, in order]}."""
    groups = {}
    for item in items:
        groups.setdefault(key(item), []).append(item)
    return groups


assert group_by(["one", "two", "three", "four"], len) == {3: ["one", "two"], 5: ["three"], 4: ["four"]}
assert group_by([], len) == {}
assert group_by([1, 2, 3, 4], lambda n: n % 2) == {1: [1, 3], 0: [2, 4]}


def only_keys(mapping, allowed):
    """A copy of `mapping` keeping only the keys in `allowed`."""
    return {key: value for key, value in mapping.items() if key in allowed}


assert only_keys({"a": 1, "b": 2, "c": 3}, {"a", "c"}) == {"a": 1, "c": 3}
assert only_keys({"a": 1}, []) == {}


def set_path(data, keys, value):
    """Set `data[k1][k2]...[kn] = value`, creating the inner dicts that are missing. Returns data."""
    current = data
    for key in keys[:-1]:
        current = current.setdefault(key, {})
    current[keys[-1]] = value
    return data


assert set_path({}, ["a", "b", "c"], 1) == {"a": {"b": {"c": 1}}}
assert set_path({"a": {"x": 0}}, ["a", "y"], 2) == {"a": {"x": 0, "y": 2}}
assert set_path({"k": 1}, ["k"], 9) == {"k": 9}


def top_keys(counts, n):
    """The `n` keys with the highest counts; ties broken by key."""
    ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    return [key for key, _ in ranked[:n]]


assert top_keys({"a": 3, "b": 5, "c": 3, "d": 1}, 3) == ["b", "a", "c"]
assert top_keys({"x": 1}, 5) == ["x"]
assert top_keys({}, 2) == []


def compare_dicts(old, new):
    """(added keys, removed keys, keys whose value changed), each sorted."""
    added = sorted(new.keys() - old.keys())
    removed = sorted(old.keys() - new.keys())
    changed = sorted(key for key in old.keys() & new.keys() if old[key] != new[key])
    return added, removed, changed


assert compare_dicts({"a": 1, "b": 2}, {"b": 3, "c": 4}) == (["c"], ["a"], ["b"])
assert compare_dicts({}, {}) == ([], [], [])
assert compare_dicts({"x": 1}, {"x": 1}) == ([], [], [])


def flatten_keys(nested, separator="."):
    """Flatten nested dicts into one level: {"a": {"b": 1}} -> {"a.b": 1}."""
    flat = {}
    for key, value in nested.items():
        if isinstance(value, dict) and value:
            for inner, leaf in flatten_keys(value, separator).items():
                flat[f"{key}{separator}{inner}"] = leaf
        else:
            flat[key] = value
    return flat


assert flatten_keys({"a": {"b": 1, "c": {"d": 2}}, "e": 3}) == {"a.b": 1, "a.c.d": 2, "e": 3}
assert flatten_keys({"a": {}}) == {"a": {}}
assert flatten_keys({"x": {"y": 0}}, "/") == {"x/y": 0}


def word_frequencies(text):
    """{word: count} of the lowercase words of `text` (letters and apostrophes)."""
    counts = {}
    for word in text.lower().split():
        word = word.strip('.,;:!?"()')
        if word:
            counts[word] = counts.get(word, 0) + 1
    return counts


assert word_frequencies("The cat and the hat.") == {"the": 2, "cat": 1, "and": 1, "hat": 1}
assert word_frequencies("") == {}
assert word_frequencies("Don't! don't?") == {"don't": 2}


def index_by(records, field):
    """{record[field]: record}; ValueError if two records share a value."""
    index = {}
    for record in records:
        key = record[field]
        if key in index:
            raise ValueError(f"duplicate {field}: {key!r}")
        index[key] = record
    return index


assert index_by([{"id": 1, "n": "a"}, {"id": 2, "n": "b"}], "id") == {
    1: {"id": 1, "n": "a"},
    2: {"id": 2, "n": "b"},
}
assert index_by([], "id") == {}


def rename_keys(mapping, renames):
    """A copy of `mapping` with keys renamed by the `renames` dict (other keys unchanged)."""
    return {renames.get(key, key): value for key, value in mapping.items()}


assert rename_keys({"a": 1, "b": 2}, {"a": "alpha"}) == {"alpha": 1, "b": 2}
assert rename_keys({}, {"a": "b"}) == {}


def deep_merge(base, overrides):
    """Merge `overrides` into a copy of `base`; nested dicts are merged rather than replaced."""
    merged = dict(base)
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


assert deep_merge({"a": 1, "b": {"c": 2, "d": 3}}, {"b": {"d": 4}, "e": 5}) == {
    "a": 1,
    "b": {"c": 2, "d": 4},
    "e": 5,
}
assert deep_merge({"a": {"b": 1}}, {"a": 2}) == {"a": 2}
assert deep_merge({}, {}) == {}


def bucket_counts(values, width):
    """{start of bucket: how many values fall in [start, start + width)}, sorted by start."""
    counts = {}
    for value in values:
        start = value // width * width
        counts[start] = counts.get(start, 0) + 1
    return dict(sorted(counts.items()))


assert bucket_counts([1, 4, 5, 12, 14, 19], 5) == {0: 2, 5: 1, 10: 2, 15: 1}
assert bucket_counts([], 10) == {}
assert bucket_counts([-1, 0], 10) == {-10: 1, 0: 1}


def sort_by_value(mapping, descending=False):
    """The (key, value) pairs ordered by value, then key."""
    pairs = sorted(mapping.items(), key=lambda item: (item[1], item[0]))
    return pairs[::-1] if descending else pairs


assert sort_by_value({"b": 2, "a": 2, "c": 1}) == [("c", 1), ("a", 2), ("b", 2)]
assert sort_by_value({"x": 3, "y": 9}, descending=True) == [("y", 9), ("x", 3)]


def pluck(records, fields):
    """Each record reduced to the given fields (missing ones become None)."""
    return [{field: record.get(field) for field in fields} for record in records]


assert pluck([{"a": 1, "b": 2}, {"a": 3}], ["a", "b"]) == [{"a": 1, "b": 2}, {"a": 3, "b": None}]
assert pluck([], ["a"]) == []


def lookup(key, *mappings):
    """The value for `key` in the first mapping that has it; KeyError if none does."""
    for mapping in mappings:
        if key in mapping:
            return mapping[key]
    raise KeyError(key)


assert lookup("a", {"b": 1}, {"a": 2}, {"a": 3}) == 2
assert lookup("b", {"b": None}) is None
assert lookup("z", {}, {"z": 0}) == 0


def count_by(items, key):
    """{key(item): number of items with that key}."""
    counts = {}
    for item in items:
        marker = key(item)
        counts[marker] = counts.get(marker, 0) + 1
    return counts


assert count_by(["ant", "bee", "wasp"], len) == {3: 2, 4: 1}
assert count_by([], len) == {}
