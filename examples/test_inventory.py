"""Tests of the example module (run with: python -m pytest examples)."""

import pytest
from inventory import Inventory


def test_adding_and_removing_keeps_counts_and_value():
    shelves = Inventory()
    shelves.add("apple", 0.5, 4)
    shelves.add("pear", 0.75, 2)
    shelves.add("apple", 9.0)  # a name already stocked keeps its price
    assert shelves.items["apple"].count == 5 and shelves.items["apple"].price == 0.5
    assert shelves.total_value() == 5 * 0.5 + 2 * 0.75
    shelves.remove("pear", 2)
    assert "pear" not in shelves.items
    with pytest.raises(ValueError, match="only 5 apple left"):
        shelves.remove("apple", 6)


def test_the_cheapest_item():
    shelves = Inventory()
    assert shelves.cheapest() is None
    shelves.add("melon", 3.0)
    shelves.add("plum", 0.2, 10)
    assert shelves.cheapest().name == "plum"
