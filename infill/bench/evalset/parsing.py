"""Execution-checked functions: parsing small text formats. Each is followed by its asserts."""

import operator
import re


def _raises(error, function, *args):
    try:
        function(*args)
    except error:
        return True
    return False


def parse_settings(text):
    """`"a=1; b = two"` -> {"a": "1", "b": "two"}: pairs split on ";", keys and values trimmed."""
    settings = {}
    for pair in text.split(";"):
        if pair.strip():
            key, _, value = pair.partition("=")
            settings[key.strip()] = value.strip()
    return settings


assert parse_settings("a=1; b = two") == {"a": "1", "b": "two"}
assert parse_settings("") == {}
assert parse_settings("url=x=y;") == {"url": "x=y"}


def parse_duration(text):
    """Seconds in a duration like "1h30m15s" (units d, h, m, s; each optional)."""
    units = {"d": 86400, "h": 3600, "m": 60, "s": 1}
    total = 0
    for amount, unit in re.findall(r"(\d+)([dhms])", text):
        total += int(amount) * units[unit]
    return total


assert parse_duration("1h30m15s") == 5415
assert parse_duration("2d") == 172800
assert parse_duration("45s") == 45


def parse_version(text):
    """ "1.10.2" -> (1, 10, 2), so versions compare as numbers; a leading "v" is allowed."""
    return tuple(int(part) for part in text.lstrip("v").split("."))


assert parse_version("1.10.2") == (1, 10, 2)
assert parse_version("v2.0") > parse_version("1.99.99")
assert parse_version("3") == (3,)


def split_csv_line(line):
    """Fields of one CSV line: commas separate, double quotes group, "" inside quotes is a quote."""
    fields, current, quoted, i = [], "", False, 0
    while i < len(line):
        char = line[i]
        if quoted and char == '"' and line[i + 1 : i + 2] == '"':
            current += '"'
            i += 1
        elif char == '"':
            quoted = not quoted
        elif char == "," and not quoted:
            fields.append(current)
            current = ""
        else:
            current += char
        i += 1
    return fields + [current]


assert split_csv_line('a,"b,c",d') == ["a", "b,c", "d"]
assert split_csv_line('"say ""hi""",x') == ['say "hi"', "x"]
assert split_csv_line("") == [""]
assert split_csv_line("1,,3") == ["1", "", "3"]


def parse_query(query):
    """ "a=1&b=x&a=2" -> {"a": ["1", "2"], "b": ["x"]}; "+" stands for a space."""
    params = {}
    for pair in query.split("&"):
        if pair:
            key, _, value = pair.partition("=")
            params.setdefault(key, []).append(value.replace("+", " "))
    return params


assert parse_query("a=1&b=x&a=2") == {"a": ["1", "2"], "b": ["x"]}
assert parse_query("q=hello+world") == {"q": ["hello world"]}
assert parse_query("") == {}


def parse_color(text):
    """ "#ff8800" or "#f80" -> (255, 136, 0)."""
    digits = text.lstrip("#")
    if len(digits) == 3:
        digits = "".join(char * 2 for char in digits)
    return tuple(int(digits[i : i + 2], 16) for i in (0, 2, 4))


assert parse_color("#ff8800") == (255, 136, 0)
assert parse_color("#f80") == (255, 136, 0)
assert parse_color("000000") == (0, 0, 0)


def tokenize_expression(text):
    """Numbers, names, operators and parentheses of an arithmetic expression, as strings."""
    return re.findall(r"\d+\.?\d*|[A-Za-z_]\w*|\*\*|[-+*/()%]", text)


assert tokenize_expression("3+4*(2-1)") == ["3", "+", "4", "*", "(", "2", "-", "1", ")"]
assert tokenize_expression("x ** 2.5 / y_1") == ["x", "**", "2.5", "/", "y_1"]
assert tokenize_expression("") == []


def evaluate_postfix(text):
    """Value of a postfix (reverse Polish) expression of integers and + - * //."""
    operations = {"+": operator.add, "-": operator.sub, "*": operator.mul, "//": operator.floordiv}
    stack = []
    for token in text.split():
        if token in operations:
            right, left = stack.pop(), stack.pop()
            stack.append(operations[token](left, right))
        else:
            stack.append(int(token))
    return stack.pop()


assert evaluate_postfix("3 4 + 2 *") == 14
assert evaluate_postfix("10 3 -") == 7
assert evaluate_postfix("17 5 //") == 3
assert evaluate_postfix("42") == 42


def parse_number_list(text):
    """ "1-3,7,9-10" -> [1, 2, 3, 7, 9, 10]."""
    numbers = []
    for part in text.split(","):
        if "-" in part:
            start, end = part.split("-")
            numbers.extend(range(int(start), int(end) + 1))
        elif part.strip():
            numbers.append(int(part))
    return numbers


assert parse_number_list("1-3,7,9-10") == [1, 2, 3, 7, 9, 10]
assert parse_number_list("5") == [5]
assert parse_number_list("") == []


def parse_flag(text):
    """True for yes/true/on/1, False for no/false/off/0 (any case); ValueError otherwise."""
    value = text.strip().lower()
    if value in ("yes", "true", "on", "1"):
        return True
    if value in ("no", "false", "off", "0"):
        return False
    raise ValueError(f"not a boolean: {text!r}")


assert parse_flag("Yes") is True
assert parse_flag(" off ") is False
assert _raises(ValueError, parse_flag, "maybe")


def parse_sections(text):
    """An INI-like text as {section: {key: value}}; lines before any [section] go to ""."""
    sections = {"": {}}
    current = ""
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("[") and line.endswith("]"):
            current = line[1:-1].strip()
            sections.setdefault(current, {})
        elif "=" in line and not line.startswith(("#", ";")):
            key, value = line.split("=", 1)
            sections[current][key.strip()] = value.strip()
    return sections


assert parse_sections("x = 1\n[db]\nhost = local\n# note\nport=5432") == {
    "": {"x": "1"},
    "db": {"host": "local", "port": "5432"},
}
assert parse_sections("") == {"": {}}


def numbers_in(text):
    """Every number in `text`, as int or float as written (a leading minus is part of it)."""
    found = re.findall(r"-?\d+(?:\.\d+)?", text)
    return [float(item) if "." in item else int(item) for item in found]


assert numbers_in("3 apples cost 1.25, change -2") == [3, 1.25, -2]
assert numbers_in("none here") == []


def normalize_path(path):
    """Resolve "." and ".." in a "/"-separated absolute path and drop repeated slashes."""
    parts = []
    for part in path.split("/"):
        if part == "..":
            if parts:
                parts.pop()
        elif part and part != ".":
            parts.append(part)
    return "/" + "/".join(parts)


assert normalize_path("/a//b/./c/../d") == "/a/b/d"
assert normalize_path("/../x") == "/x"
assert normalize_path("/") == "/"


def parse_log_line(line):
    """ "2024-01-02 12:00:01 [ERROR] disk full" -> {"date", "time", "level", "message"}; None if
    the line does not have that shape."""
    match = re.match(r"(\d{4}-\d\d-\d\d) (\d\d:\d\d:\d\d) \[(\w+)\] (.*)", line)
    if match is None:
        return None
    return dict(zip(("date", "time", "level", "message"), match.groups()))


assert parse_log_line("2024-01-02 12:00:01 [ERROR] disk full") == {
    "date": "2024-01-02",
    "time": "12:00:01",
    "level": "ERROR",
    "message": "disk full",
}
assert parse_log_line("garbage") is None


def parse_size(text):
    """ "10MB" -> 10_000_000, "2KiB" -> 2048, "512" -> 512 (decimal and binary units)."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]i?)?B?\s*", text)
    if match is None:
        raise ValueError(f"not a size: {text!r}")
    number, unit = float(match[1]), match[2] or ""
    power = " KMGT".index(unit[0]) if unit else 0
    return int(number * (1024 if unit.endswith("i") else 1000) ** power)


assert parse_size("10MB") == 10_000_000
assert parse_size("2KiB") == 2048
assert parse_size("512") == 512
assert parse_size("1.5 GB") == 1_500_000_000
assert _raises(ValueError, parse_size, "ten")


def brackets_balanced(text):
    """Whether (), [] and {} in `text` open and close in a properly nested way."""
    pairs = {")": "(", "]": "[", "}": "{"}
    stack = []
    for char in text:
        if char in "([{":
            stack.append(char)
        elif char in pairs and (not stack or stack.pop() != pairs[char]):
            return False
    return not stack


assert brackets_balanced("f(a[1], {b: 2})")
assert not brackets_balanced("(]")
assert not brackets_balanced("((")
assert brackets_balanced("")


def parse_date(text):
    """ "2024-03-05" -> (2024, 3, 5); ValueError for a bad shape, month or day."""
    match = re.fullmatch(r"(\d{4})-(\d\d)-(\d\d)", text)
    if match is None:
        raise ValueError(f"expected YYYY-MM-DD, got {text!r}")
    year, month, day = (int(part) for part in match.groups())
    if not 1 <= month <= 12 or not 1 <= day <= 31:
        raise ValueError(f"no such date: {text!r}")
    return year, month, day


assert parse_date("2024-03-05") == (2024, 3, 5)
assert _raises(ValueError, parse_date, "2024-13-01")
assert _raises(ValueError, parse_date, "5/3/2024")


def parse_headers(text):
    """HTTP-style header lines as {lowercase name: value}; repeated names are joined by ", "."""
    headers = {}
    for line in text.splitlines():
        name, colon, value = line.partition(":")
        if colon:
            key = name.strip().lower()
            headers[key] = f"{headers[key]}, {value.strip()}" if key in headers else value.strip()
    return headers


assert parse_headers("Host: example.org\nAccept: a\naccept: b") == {"host": "example.org", "accept": "a, b"}
assert parse_headers("no colon here") == {}
