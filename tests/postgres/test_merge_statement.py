"""A small commit's merges (:mod:`cronwarden.adapters.postgres.commit_sql`: one term per counter)
leave the same data as the port's rule (:func:`cronwarden.model.ports.apply_merge`) and as the
server-side ``merge_data`` of large commits, for any fields, counters and stored values: missing,
JSON null, negative, past 64 bits, and field names that are SQL or JSON syntax."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cronwarden.adapters.postgres import PostgresStore
from cronwarden.adapters.postgres.commit_sql import MAX_OPS
from cronwarden.model.ports import STATUS, Create, Key, Merge, apply_merge

pytestmark = [
    pytest.mark.postgres,
    # the pool's threads draw jitter from ``random`` while an example runs: not the strategy's
    pytest.mark.filterwarnings("ignore::hypothesis.errors.HypothesisDeprecationWarning"),
]

_names = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
    max_size=8,
) | st.sampled_from(["'", "'); DROP TABLE x; --", "%(f0)s", "a->>b", "windows_open"])
_counts = st.integers(min_value=-(2**70), max_value=2**70)
_stored_counter = st.none() | _counts  # None: the field holds JSON null
_plain = st.none() | st.booleans() | st.integers(-5, 5) | st.text(max_size=4)


@st.composite
def _cases(draw: st.DrawFn) -> tuple[dict[str, Any] | None, Merge]:
    names = draw(st.lists(_names, min_size=1, max_size=7, unique=True))
    groups = [draw(st.integers(0, 2)) for _ in names]  # 0 field, 1 increment, 2 maximum
    fields = {n: draw(_plain) for n, g in zip(names, groups, strict=True) if g == 0}
    increments = {n: draw(_counts) for n, g in zip(names, groups, strict=True) if g == 1}
    maximums = {n: draw(_counts) for n, g in zip(names, groups, strict=True) if g == 2}
    base: dict[str, Any] | None = None
    if draw(st.booleans()):
        base = {"kept": draw(_plain)}
        for name in names:  # a counter's stored value: absent, null or a number
            if draw(st.booleans()):
                base[name] = draw(_stored_counter) if name not in fields else draw(_plain)
    return base, Merge(Key(STATUS, "merge", "m"), fields, increments, maximums)


_ids = itertools.count()


@pytest.fixture
def store(make_store: Callable[..., PostgresStore]) -> PostgresStore:
    """One store for every example of a test (hypothesis runs them in one fixture scope)."""
    return make_store()


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(case=_cases())
def test_a_merge_leaves_the_ports_data_on_both_paths(
    store: PostgresStore, case: tuple[dict[str, Any] | None, Merge]
) -> None:
    base, op = case
    n = next(_ids)
    small, large = Key(STATUS, "merge", f"s{n}"), Key(STATUS, "merge", f"l{n}")
    padding = [Merge(Key(STATUS, "merge", f"p{n}-{i}"), {"x": i}) for i in range(MAX_OPS)]
    if base is not None:
        store.commit([Create(small, base), Create(large, base)])
    store.commit([Merge(small, op.fields, op.increments, op.maximums)])  # one plain statement
    store.commit([Merge(large, op.fields, op.increments, op.maximums), *padding])  # commit_ops
    expected = apply_merge(base, op)
    got_small, got_large = store.get(small), store.get(large)
    assert got_small is not None and got_large is not None
    assert got_small.data == expected
    assert got_large.data == expected


@pytest.mark.parametrize("where", ["fields", "increments", "maximums"])
def test_a_counter_named_with_nul_is_refused_for_its_content(
    store: PostgresStore, where: str
) -> None:
    from cronwarden.model.errors import ContentRefused

    key = Key(STATUS, "merge", f"nul-{where}")
    parts: dict[str, Any] = {"fields": {}, "increments": {}, "maximums": {}}
    parts[where] = {"a\x00b": 1}
    with pytest.raises(ContentRefused):
        store.commit([Merge(key, parts["fields"], parts["increments"], parts["maximums"])])
    assert store.get(key) is None
