"""Execution-checked functions: text handling. Each is followed by the asserts that check it."""

import re


def slugify(title):
    """Lowercase `title` and join its runs of letters and digits with single hyphens."""
    words = re.findall(r"[a-z0-9]+", title.lower())
    return "-".join(words)


assert slugify("Hello, World!") == "hello-world"
assert slugify("  Release 2.0 -- final  ") == "release-2-0-final"
assert slugify("???") == ""


def count_vowels(text):
    """How many of the characters in `text` are vowels (a, e, i, o, u; either case)."""
    return sum(1 for char in text.lower() if char in "aeiou")


assert count_vowels("Banana") == 3
assert count_vowels("rhythm") == 0
assert count_vowels("AEIOU xyz") == 5


def is_palindrome(text):
    """Whether `text` reads the same backwards, ignoring case and anything not a letter or digit."""
    kept = [char.lower() for char in text if char.isalnum()]
    return kept == kept[::-1]


assert is_palindrome("Never odd or even")
assert is_palindrome("No 'x' in Nixon")
assert not is_palindrome("palindrome")
assert is_palindrome("")


def squeeze_runs(text):
    """Run-length code: each run of a repeated character becomes the character and its count
    (the count is left out for runs of one)."""
    out = []
    for match in re.finditer(r"(.)\1*", text):
        run = match.group(0)
        out.append(run[0] if len(run) == 1 else f"{run[0]}{len(run)}")
    return "".join(out)


assert squeeze_runs("aaabccdddd") == "a3bc2d4"
assert squeeze_runs("abc") == "abc"
assert squeeze_runs("") == ""


def expand_runs(code):
    """Undo `squeeze_runs`: a character followed by digits repeats that many times."""
    out = []
    for char, count in re.findall(r"(\D)(\d*)", code):
        out.append(char * (int(count) if count else 1))
    return "".join(out)


assert expand_runs("a3bc2d4") == "aaabccdddd"
assert expand_runs("xyz") == "xyz"
assert expand_runs("q10") == "q" * 10


def shorten(text, width, marker="..."):
    """Cut `text` to at most `width` characters, ending with `marker` when something was cut."""
    if len(text) <= width:
        return text
    return text[: max(0, width - len(marker))] + marker


assert shorten("short", 10) == "short"
assert shorten("a rather long sentence", 10) == "a rathe..."
assert shorten("abcdef", 4, marker="~") == "abc~"


def snake_to_camel(name):
    """`parse_http_header` -> `parseHttpHeader`; leading underscores are kept."""
    stripped = name.lstrip("_")
    head, *rest = stripped.split("_")
    return "_" * (len(name) - len(stripped)) + head + "".join(part.capitalize() for part in rest)


assert snake_to_camel("parse_http_header") == "parseHttpHeader"
assert snake_to_camel("value") == "value"
assert snake_to_camel("_private_name") == "_privateName"


def camel_to_snake(name):
    """`parseHTTPHeader` -> `parse_http_header`: a new word starts at each capital that follows
    a lowercase letter or digit, or that starts a capitalised word after an acronym."""
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name)
    spaced = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", spaced)
    return spaced.lower()


assert camel_to_snake("parseHTTPHeader") == "parse_http_header"
assert camel_to_snake("userId") == "user_id"
assert camel_to_snake("already_snake") == "already_snake"


def shared_prefix(words):
    """The longest string every word in `words` starts with ("" for no words)."""
    if not words:
        return ""
    prefix = words[0]
    for word in words[1:]:
        while not word.startswith(prefix):
            prefix = prefix[:-1]
    return prefix


assert shared_prefix(["interval", "internet", "interior"]) == "inter"
assert shared_prefix(["same", "same"]) == "same"
assert shared_prefix(["abc", "xyz"]) == ""
assert shared_prefix([]) == ""


def rotate_letters(text, shift):
    """Shift every ASCII letter `shift` places along the alphabet (wrapping), keeping its case."""
    out = []
    for char in text:
        if char.isascii() and char.isalpha():
            base = ord("a") if char.islower() else ord("A")
            char = chr(base + (ord(char) - base + shift) % 26)
        out.append(char)
    return "".join(out)


assert rotate_letters("abc xyz", 3) == "def abc"
assert rotate_letters("Hello!", 13) == "Uryyb!"
assert rotate_letters(rotate_letters("Round Trip", 7), -7) == "Round Trip"


def wrap_words(text, width):
    """Greedy word wrap: lines of whole words, each at most `width` characters when possible."""
    lines, current = [], ""
    for word in text.split():
        if current and len(current) + 1 + len(word) > width:
            lines.append(current)
            current = word
        else:
            current = f"{current} {word}" if current else word
    return lines + [current] if current else lines


assert wrap_words("the quick brown fox jumps", 10) == ["the quick", "brown fox", "jumps"]
assert wrap_words("", 5) == []
assert wrap_words("unbreakable word", 4) == ["unbreakable", "word"]


def strip_comment(line):
    """Remove a `#` comment from a line of code, but not a `#` inside a quoted string."""
    quote = None
    for index, char in enumerate(line):
        if quote:
            quote = None if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#":
            return line[:index].rstrip()
    return line


assert strip_comment("x = 1  # set x") == "x = 1"
assert strip_comment("s = '#not a comment'") == "s = '#not a comment'"
assert strip_comment('t = "a#b"  # real') == 't = "a#b"'


def letter_counts(text):
    """{letter: count} of the letters in `text`, case-folded, in alphabetical order."""
    counts = {}
    for char in sorted(text.lower()):
        if char.isalpha():
            counts[char] = counts.get(char, 0) + 1
    return counts


assert letter_counts("Hello") == {"e": 1, "h": 1, "l": 2, "o": 1}
assert list(letter_counts("cab")) == ["a", "b", "c"]
assert letter_counts("123 !") == {}


def reverse_words(sentence):
    """The words of `sentence` in reverse order, separated by single spaces."""
    return " ".join(reversed(sentence.split()))


assert reverse_words("one two  three") == "three two one"
assert reverse_words("solo") == "solo"
assert reverse_words("   ") == ""


def indent_lines(text, prefix="    "):
    """Put `prefix` before every line of `text` that is not blank."""
    lines = text.split("\n")
    return "\n".join(prefix + line if line.strip() else line for line in lines)


assert indent_lines("a\n\nb") == "    a\n\n    b"
assert indent_lines("x", "> ") == "> x"
assert indent_lines("one\n  \ntwo\n", "-") == "-one\n  \n-two\n"


def mask_email(address):
    """Hide the middle of an email's local part: `john.doe@example.com` -> `j******e@example.com`."""
    local, _, domain = address.partition("@")
    if len(local) <= 2:
        return f"{'*' * len(local)}@{domain}"
    return f"{local[0]}{'*' * (len(local) - 2)}{local[-1]}@{domain}"


assert mask_email("john.doe@example.com") == "j******e@example.com"
assert mask_email("al@x.org") == "**@x.org"
assert mask_email("bob@y.net") == "b*b@y.net"


def longest_word(text):
    """The first of the longest words (runs of letters) in `text`, or None if there is none."""
    words = re.findall(r"[A-Za-z]+", text)
    if not words:
        return None
    return max(words, key=len)


assert longest_word("a tiny elephant sat") == "elephant"
assert longest_word("cat dog") == "cat"
assert longest_word("42!") is None


def normalize_spaces(text):
    """Collapse every run of whitespace into one space and trim both ends."""
    return " ".join(text.split())


assert normalize_spaces("  lots   of\tspace\n here ") == "lots of space here"
assert normalize_spaces("") == ""


def title_case(text, small=("a", "an", "the", "of", "and", "in")):
    """Capitalise each word, except small words that are not the first word."""
    words = text.lower().split()
    out = [word if i > 0 and word in small else word.capitalize() for i, word in enumerate(words)]
    return " ".join(out)


assert title_case("the lord of the rings") == "The Lord of the Rings"
assert title_case("AN APPLE a DAY") == "An Apple a Day"
assert title_case("") == ""


def pad_table(rows):
    """Render rows of strings as text columns, each as wide as its widest cell, joined by 2 spaces."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)) for row in rows]
    return "\n".join(line.rstrip() for line in lines)


assert pad_table([["a", "bb"], ["ccc", "d"]]) == "a    bb\nccc  d"
assert pad_table([["name", "qty"], ["pear", "12"]]) == "name  qty\npear  12"


def count_substring(text, part, overlapping=True):
    """How many times `part` occurs in `text`, counting overlapping occurrences unless told not to."""
    if not part:
        return 0
    if not overlapping:
        return text.count(part)
    return sum(1 for i in range(len(text) - len(part) + 1) if text.startswith(part, i))


assert count_substring("aaaa", "aa") == 3
assert count_substring("aaaa", "aa", overlapping=False) == 2
assert count_substring("abc", "") == 0
assert count_substring("banana", "ana") == 2
