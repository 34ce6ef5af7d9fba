import pytest

from labkit import units


@pytest.mark.parametrize(
    "text,expected",
    [
        ("4", 4),
        ("4B", 4),
        ("1KiB", 1024),
        ("64MiB", 64 << 20),
        ("1GiB", 1 << 30),
        ("64M", 64 << 20),
        ("32MB", 32_000_000),
        ("14GB", 14_000_000_000),
        ("0.5KiB", 512),
        (4096, 4096),
    ],
)
def test_parse_size(text, expected):
    assert units.parse_size(text) == expected


@pytest.mark.parametrize("bad", ["0", "-4", "abc", "4XB", "", "0.3B", "1TiB", True])
def test_parse_size_rejects(bad):
    with pytest.raises((ValueError, TypeError)):
        units.parse_size(bad)


def test_pow2_sizes_and_format():
    assert units.pow2_sizes("4B", "64B") == [4, 8, 16, 32, 64]
    assert units.pow2_sizes(4, 1024, step=2) == [4, 16, 64, 256, 1024]
    assert units.format_bytes(1 << 30) == "1 GiB"
    assert units.format_bytes(3 << 19) == "1.5 MiB"
    with pytest.raises(ValueError):
        units.pow2_sizes("1MiB", "1KiB")


def test_gbps_is_decimal():
    assert units.gbps(1e9, 1.0) == 1.0
    assert units.gbps(1 << 30, 1.0) == pytest.approx(1.073741824)
    with pytest.raises(ValueError):
        units.gbps(1, 0)
    with pytest.raises(ValueError):
        units.check_direction("both")


def test_gbit_per_s_to_GBps_divides_by_eight_bits():
    from labkit.units import gbit_per_s_to_GBps

    assert gbit_per_s_to_GBps(400) == 50.0 and gbit_per_s_to_GBps(200) == 25.0  # NDR, NDR200 per direction
    with pytest.raises(ValueError):
        gbit_per_s_to_GBps(-1)
