"""The generation process's cache policy: least recently used out, bounded by bytes; no models involved."""

from __future__ import annotations

import pytest

from tunedeck.core.byte_budget_cache import ByteBudgetCache


def test_entries_are_kept_while_their_bytes_fit_the_budget() -> None:
    cache: ByteBudgetCache[str] = ByteBudgetCache(100)
    assert cache.put("a", "model a", 40).kept and cache.put("b", "model b", 60).kept
    assert cache.keys() == ["a", "b"] and cache.used_bytes == 100
    assert cache.get("a") == "model a" and cache.get("missing") is None


def test_the_least_recently_used_entry_goes_first() -> None:
    cache: ByteBudgetCache[str] = ByteBudgetCache(100)
    cache.put("a", "a", 40)
    cache.put("b", "b", 40)
    cache.get("a")  # now b is the least recently used
    stored = cache.put("c", "c", 40)
    assert stored.kept and stored.evicted == ["b"]
    assert cache.keys() == ["a", "c"] and "b" not in cache and cache.used_bytes == 80


def test_as_many_entries_go_as_the_new_one_needs() -> None:
    cache: ByteBudgetCache[str] = ByteBudgetCache(100)
    for key in "abcd":
        cache.put(key, key, 25)
    stored = cache.put("big", "big", 60)
    assert stored.evicted == ["a", "b", "c"] and cache.keys() == ["d", "big"] and cache.used_bytes == 85


def test_an_entry_larger_than_the_budget_is_not_kept_and_evicts_nothing() -> None:
    cache: ByteBudgetCache[str] = ByteBudgetCache(100)
    cache.put("a", "a", 50)
    stored = cache.put("huge", "huge", 101)
    assert not stored.kept and stored.evicted == []
    assert cache.keys() == ["a"] and cache.get("huge") is None
    nothing: ByteBudgetCache[str] = ByteBudgetCache(0)
    assert not nothing.put("a", "a", 1).kept and len(nothing) == 0


def test_storing_a_key_again_replaces_its_size() -> None:
    cache: ByteBudgetCache[str] = ByteBudgetCache(100)
    cache.put("a", "old", 90)
    cache.put("b", "b", 10)
    stored = cache.put("a", "new", 20)
    assert stored.evicted == [] and cache.get("a") == "new" and cache.used_bytes == 30
    assert cache.keys() == ["b", "a"]
    assert cache.clear() == ["b", "a"] and cache.used_bytes == 0


def test_negative_sizes_are_refused() -> None:
    with pytest.raises(ValueError, match="negative"):
        ByteBudgetCache(-1)
    with pytest.raises(ValueError, match="negative"):
        ByteBudgetCache[str](10).put("a", "a", -5)
