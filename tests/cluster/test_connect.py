"""Cluster addresses and the errors a user sees (no cluster is started here)."""

from __future__ import annotations

import pytest

from cluster.connect import ClusterError, parse_address
from tests.live.helpers import vapipe


@pytest.mark.parametrize("address", ["auto", "ray://head:10001", "10.0.0.5:6379", "ray://[::1]:10001"])
def test_valid_addresses(address: str) -> None:
    assert parse_address(address) == address


@pytest.mark.parametrize("address", ["", "head", "http://head:8265", "ray://head", "head:port"])
def test_invalid_addresses_name_the_valid_forms(address: str) -> None:
    with pytest.raises(ClusterError, match=r"expected ray://HOST:PORT .* or auto"):
        parse_address(address)


def test_cli_errors_are_one_line(tmp_path) -> None:
    bad = vapipe("run", "persons", "--source", "x.mp4", "--cluster", "head", timeout=60)
    assert bad.returncode == 2 and bad.stderr.strip().count("\n") == 0 and "--cluster 'head'" in bad.stderr
    sync = vapipe("run", "persons", "--source", "x.mp4", "--cluster", "auto", "--sync", timeout=60)
    assert sync.returncode == 2 and sync.stderr.strip() == "vapipe: error: --sync is not supported with --cluster"
