# SPDX-License-Identifier: MIT
"""Cloud VM catalog: types, prices, hardware speeds and filters."""

from thrifty.catalog.filters import CatalogFilter
from thrifty.catalog.hardware import Hardware
from thrifty.catalog.loader import load_catalog, load_catalog_file
from thrifty.catalog.vmtype import VMType

__all__ = ["CatalogFilter", "Hardware", "VMType", "load_catalog", "load_catalog_file"]
