"""``format_bytes``: the one way Tessera prints a byte count (disk errors, ``tessera cache``, ``tessera models
prune``), in binary units labelled as such."""

from __future__ import annotations

import pytest

from flows.cache_prune import parse_size
from operators.byte_sizes import format_bytes


@pytest.mark.parametrize("n, text", [(0, "0 B"), (1023, "1023 B"), (1024, "1.0 KiB"), (1536, "1.5 KiB"),
                                     (1024 ** 2 - 1, "1.0 MiB"), (5 * 1024 ** 3, "5.0 GiB"),
                                     (3 * 1024 ** 4 + 1024 ** 3 // 2, "3.0 TiB"), (2 * 1024 ** 5, "2.0 PiB")])
def test_sizes_print_in_binary_units(n, text):
    assert format_bytes(n) == text


@pytest.mark.parametrize("n", [1536, 7 << 20, 3 << 30])
def test_a_printed_size_reads_back_as_a_cache_size(n):
    assert parse_size(format_bytes(n)) == n
