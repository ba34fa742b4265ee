"""Execution-checked classes: small objects with methods. Each is followed by its asserts."""

from collections import OrderedDict, deque


def _raises(error, function, *args):
    try:
        function(*args)
    except error:
        return True
    return False


class Stack:
    """A last-in, first-out stack."""

    def __init__(self):
        self.items = []

    def push(self, item):
        self.items.append(item)

    def pop(self):
        """Remove and return the top item; IndexError if the stack is empty."""
        if not self.items:
            raise IndexError("pop from an empty stack")
        return self.items.pop()

    def peek(self):
        """The top item, or None if the stack is empty."""
        return self.items[-1] if self.items else None

    def __len__(self):
        return len(self.items)


_stack = Stack()
assert _stack.peek() is None and _raises(IndexError, _stack.pop)
assert [_stack.push(n) for n in (1, 2, 3)] and _stack.pop() == 3 and _stack.peek() == 2
assert len(_stack) == 2


class Tally:
    """Counts how often each item was added."""

    def __init__(self):
        self.counts = {}

    def add(self, item, times=1):
        self.counts[item] = self.counts.get(item, 0) + times

    def count(self, item):
        return self.counts.get(item, 0)

    def most_common(self, n):
        """The `n` most frequent (item, count) pairs; ties in the order items were first added."""
        return sorted(self.counts.items(), key=lambda pair: -pair[1])[:n]


_tally = Tally()
assert [_tally.add(word) for word in "a b a c b a".split()] and _tally.count("a") == 3
assert _tally.most_common(2) == [("a", 3), ("b", 2)]
assert _tally.count("zzz") == 0


class Account:
    """A bank account that refuses to go below zero."""

    def __init__(self, owner, balance=0):
        self.owner = owner
        self.balance = balance
        self.history = []

    def deposit(self, amount):
        if amount <= 0:
            raise ValueError("deposit must be positive")
        self.balance += amount
        self.history.append(("deposit", amount))

    def withdraw(self, amount):
        """Take money out; ValueError if the balance is too small."""
        if amount > self.balance:
            raise ValueError("insufficient funds")
        self.balance -= amount
        self.history.append(("withdraw", amount))


_account = Account("ana", 10)
assert _account.deposit(5) is None and _account.balance == 15
assert _raises(ValueError, _account.withdraw, 100) and _account.balance == 15
assert _account.withdraw(15) is None and _account.history == [("deposit", 5), ("withdraw", 15)]
assert _raises(ValueError, _account.deposit, 0)


class Vector:
    """A 2-D vector with +, * (by a number), == and a length."""

    def __init__(self, x, y):
        self.x, self.y = x, y

    def __add__(self, other):
        return Vector(self.x + other.x, self.y + other.y)

    def __mul__(self, factor):
        return Vector(self.x * factor, self.y * factor)

    def __eq__(self, other):
        return isinstance(other, Vector) and (self.x, self.y) == (other.x, other.y)

    def length(self):
        return (self.x**2 + self.y**2) ** 0.5


assert Vector(1, 2) + Vector(3, 4) == Vector(4, 6)
assert Vector(1, -2) * 3 == Vector(3, -6)
assert Vector(3, 4).length() == 5.0
assert Vector(1, 1) != (1, 1)


class LRUCache:
    """A mapping that keeps at most `capacity` entries, forgetting the least recently used."""

    def __init__(self, capacity):
        self.capacity = capacity
        self.entries = OrderedDict()

    def get(self, key, default=None):
        if key not in self.entries:
            return default
        self.entries.move_to_end(key)
        return self.entries[key]

    def put(self, key, value):
        self.entries[key] = value
        self.entries.move_to_end(key)
        if len(self.entries) > self.capacity:
            self.entries.popitem(last=False)


_cache = LRUCache(2)
assert _cache.put("a", 1) is None and _cache.put("b", 2) is None and _cache.get("a") == 1
assert _cache.put("c", 3) is None and _cache.get("b") is None  # b was the least recently used
assert _cache.get("a") == 1 and _cache.get("c") == 3


class Rect:
    """An axis-aligned rectangle from (left, top) with a width and a height."""

    def __init__(self, left, top, width, height):
        self.left, self.top, self.width, self.height = left, top, width, height

    def area(self):
        return self.width * self.height

    def contains(self, x, y):
        return self.left <= x < self.left + self.width and self.top <= y < self.top + self.height

    def overlaps(self, other):
        """Whether the two rectangles share some area."""
        return (
            self.left < other.left + other.width
            and other.left < self.left + self.width
            and self.top < other.top + other.height
            and other.top < self.top + self.height
        )


assert Rect(0, 0, 4, 3).area() == 12
assert Rect(0, 0, 4, 3).contains(3, 2) and not Rect(0, 0, 4, 3).contains(4, 0)
assert Rect(0, 0, 2, 2).overlaps(Rect(1, 1, 2, 2))
assert not Rect(0, 0, 2, 2).overlaps(Rect(2, 0, 1, 1))


class Inventory:
    """Quantities of items in stock."""

    def __init__(self):
        self.stock = {}

    def add(self, item, quantity):
        self.stock[item] = self.stock.get(item, 0) + quantity

    def remove(self, item, quantity):
        """Take items out; KeyError for an unknown item, ValueError if there are not enough."""
        if item not in self.stock:
            raise KeyError(item)
        if self.stock[item] < quantity:
            raise ValueError(f"only {self.stock[item]} {item} left")
        self.stock[item] -= quantity

    def total(self):
        return sum(self.stock.values())


_inventory = Inventory()
assert _inventory.add("bolt", 10) is None and _inventory.remove("bolt", 4) is None
assert _inventory.total() == 6
assert _raises(KeyError, _inventory.remove, "nut", 1) and _raises(ValueError, _inventory.remove, "bolt", 7)


class Temperature:
    """A temperature stored in Celsius, readable and settable in Fahrenheit too."""

    def __init__(self, celsius=0.0):
        self.celsius = celsius

    @property
    def fahrenheit(self):
        return self.celsius * 9 / 5 + 32

    @fahrenheit.setter
    def fahrenheit(self, value):
        self.celsius = (value - 32) * 5 / 9


_temperature = Temperature(100)
assert _temperature.fahrenheit == 212
_temperature.fahrenheit = 32
assert _temperature.celsius == 0
assert Temperature(-40).fahrenheit == -40


class TwoStackQueue:
    """A first-in, first-out queue built from two lists used as stacks."""

    def __init__(self):
        self.incoming, self.outgoing = [], []

    def put(self, item):
        self.incoming.append(item)

    def get(self):
        """The oldest item; IndexError if the queue is empty."""
        if not self.outgoing:
            while self.incoming:
                self.outgoing.append(self.incoming.pop())
        return self.outgoing.pop()


_queue = TwoStackQueue()
assert [_queue.put(n) for n in (1, 2)] and _queue.get() == 1
assert _queue.put(3) is None and _queue.get() == 2 and _queue.get() == 3
assert _raises(IndexError, _queue.get)


class EventBus:
    """Publish events by name to the handlers subscribed to that name."""

    def __init__(self):
        self.handlers = {}

    def subscribe(self, name, handler):
        self.handlers.setdefault(name, []).append(handler)

    def publish(self, name, payload):
        """Call every handler of `name` with the payload; return how many were called."""
        for handler in self.handlers.get(name, []):
            handler(payload)
        return len(self.handlers.get(name, []))


_bus, _seen = EventBus(), []
assert _bus.subscribe("saved", _seen.append) is None and _bus.publish("saved", "doc1") == 1
assert _bus.publish("deleted", "doc2") == 0 and _seen == ["doc1"]


class Stopwatch:
    """Measures elapsed time with a clock function (injected, so it can be tested)."""

    def __init__(self, clock):
        self.clock = clock
        self.started = None
        self.elapsed = 0.0

    def start(self):
        self.started = self.clock()

    def stop(self):
        """Add the time since start() to `elapsed`, and return `elapsed`."""
        self.elapsed += self.clock() - self.started
        self.started = None
        return self.elapsed


_ticks = iter([10.0, 12.5, 20.0, 21.0])
_watch = Stopwatch(lambda: next(_ticks))
assert _watch.start() is None and _watch.stop() == 2.5
assert _watch.start() is None and _watch.stop() == 3.5


class RingBuffer:
    """Keeps the last `capacity` items appended."""

    def __init__(self, capacity):
        self.items = deque(maxlen=capacity)

    def append(self, item):
        self.items.append(item)

    def latest(self, n):
        """The `n` most recent items, oldest first."""
        return list(self.items)[-n:] if n else []


_ring = RingBuffer(3)
assert [_ring.append(n) for n in range(5)] and _ring.latest(3) == [2, 3, 4]
assert _ring.latest(2) == [3, 4] and _ring.latest(0) == []


class Graph:
    """An undirected graph as adjacency sets."""

    def __init__(self):
        self.edges = {}

    def connect(self, a, b):
        self.edges.setdefault(a, set()).add(b)
        self.edges.setdefault(b, set()).add(a)

    def reachable(self, start, goal):
        """Whether a path leads from `start` to `goal` (breadth-first search)."""
        seen, frontier = {start}, deque([start])
        while frontier:
            node = frontier.popleft()
            if node == goal:
                return True
            for neighbour in self.edges.get(node, ()):
                if neighbour not in seen:
                    seen.add(neighbour)
                    frontier.append(neighbour)
        return False


_graph = Graph()
assert [_graph.connect(a, b) for a, b in ("ab", "bc", "xy")] and _graph.reachable("a", "c")
assert not _graph.reachable("a", "y") and _graph.reachable("z", "z")


class Polynomial:
    """A polynomial from its coefficients, lowest power first: [1, 0, 2] is 1 + 2x^2."""

    def __init__(self, coefficients):
        self.coefficients = list(coefficients)

    def __call__(self, x):
        result = 0
        for coefficient in reversed(self.coefficients):
            result = result * x + coefficient
        return result

    def __add__(self, other):
        size = max(len(self.coefficients), len(other.coefficients))
        padded = [c + [0] * (size - len(c)) for c in (self.coefficients, other.coefficients)]
        return Polynomial([a + b for a, b in zip(*padded)])

    def degree(self):
        nonzero = [i for i, c in enumerate(self.coefficients) if c]
        return nonzero[-1] if nonzero else 0


assert Polynomial([1, 0, 2])(3) == 19
assert (Polynomial([1, 2]) + Polynomial([0, 0, 5])).coefficients == [1, 2, 5]
assert Polynomial([4, 1, 0]).degree() == 1


class Matrix:
    """A small matrix of numbers, as a list of rows."""

    def __init__(self, rows):
        self.rows = [list(row) for row in rows]

    def __matmul__(self, other):
        columns = list(zip(*other.rows))
        return Matrix([[sum(a * b for a, b in zip(row, col)) for col in columns] for row in self.rows])

    def transposed(self):
        return Matrix(zip(*self.rows))


assert (Matrix([[1, 2], [3, 4]]) @ Matrix([[5], [6]])).rows == [[17], [39]]
assert Matrix([[1, 2, 3]]).transposed().rows == [[1], [2], [3]]
