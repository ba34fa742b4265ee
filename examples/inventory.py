"""A small stock-keeping module: the example the README's first command fills a line of."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Item:
    """One kind of thing on the shelves: its name, unit price and how many there are."""

    name: str
    price: float
    count: int = 0


@dataclass
class Inventory:
    """Items by name."""

    items: dict[str, Item] = field(default_factory=dict)

    def add(self, name: str, price: float, count: int = 1) -> Item:
        """Add `count` of `name` at `price`; a name already stocked keeps its price."""
        item = self.items.get(name)
        if item is None:
            item = self.items[name] = Item(name, price)
        item.count += count
        return item

    def remove(self, name: str, count: int = 1) -> None:
        """Take `count` of `name` off the shelves; ValueError if there are fewer."""
        item = self.items[name]
        if item.count < count:
            raise ValueError(f"only {item.count} {name} left")
        item.count -= count
        if item.count == 0:
            del self.items[name]

    def total_value(self) -> float:
        """What everything on the shelves is worth."""
        total = 0.0
        for item in self.items.values():
            total += item.price * item.count
        return total

    def cheapest(self) -> Item | None:
        """The item with the lowest price, or None when the shelves are empty."""
        if not self.items:
            return None
        return min(self.items.values(), key=lambda item: item.price)
