"""The jobs list's links: each sortable column header, and the next page, keeping the filters in the URL."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlencode

from tunedeck.store.jobs import JobSort
from tunedeck.web.locales.catalogue import marked

# The list's columns in order: (title, the sort it sets, or None when it cannot sort the list).
# The titles are English messages: the page shows each in its language (`_(column.title)`).
COLUMNS: tuple[tuple[str, JobSort | None], ...] = (
    (marked("Name"), JobSort.NAME),
    (marked("State"), JobSort.STATE),
    (marked("Tags"), None),
    (marked("Progress"), None),
    (marked("Duration"), JobSort.DURATION),
    (marked("ETA"), None),
    (marked("Best metric"), None),
    (marked("Created"), JobSort.CREATED),
)
# The direction a column sorts in when first chosen: newest, longest first; names and states A to Z.
FIRST_ORDER = {JobSort.CREATED: "desc", JobSort.DURATION: "desc", JobSort.NAME: "asc", JobSort.STATE: "asc"}
ARIA_SORT = {"asc": "ascending", "desc": "descending"}


@dataclass(frozen=True)
class Column:
    """One header of the jobs table: its title, and for a sortable one its link and `aria-sort` value."""

    title: str
    href: str | None = None
    aria_sort: str | None = None  # "ascending" or "descending" on the column the list is sorted by
    key: str | None = None


@dataclass(frozen=True)
class JobListing:
    """The filters and sort of one view of the jobs list, turned into the links that keep them."""

    filters: dict[str, str | list[str]]
    sort: JobSort
    order: str

    def href(self, *, sort: JobSort | None = None, order: str | None = None, cursor: str | None = None) -> str:
        """`/jobs?...` with these filters, the given (or current) sort and order, and `cursor` if any."""
        pairs: list[tuple[str, str]] = []
        for key, value in self.filters.items():
            values = value if isinstance(value, list) else [value]
            pairs += [(key, item) for item in values if item]
        pairs += [("sort", (sort or self.sort).value), ("order", order or self.order)]
        if cursor:
            pairs.append(("cursor", cursor))
        return "/jobs?" + urlencode(pairs)

    def columns(self) -> list[Column]:
        """The table's headers: a sorted column links to the other direction, another to its first direction."""
        headers = []
        for title, sort in COLUMNS:
            if sort is None:
                headers.append(Column(title))
            elif sort is self.sort:
                flipped = "asc" if self.order == "desc" else "desc"
                headers.append(Column(title, self.href(sort=sort, order=flipped), ARIA_SORT[self.order], sort.value))
            else:
                headers.append(Column(title, self.href(sort=sort, order=FIRST_ORDER[sort]), None, sort.value))
        return headers
