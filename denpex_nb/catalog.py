"""``denpex_nb.catalog``: the failure catalog (an alias of :mod:`denpex_nb.analysis.catalog`)."""

from .analysis.catalog import IDS, CatalogEntry, all, get, match  # noqa: A004,F401

__all__ = ["IDS", "CatalogEntry", "get", "all", "match"]
