"""The spec table: every entry cited, directions stated, lookups unique, network rates per direction."""

import math
import re

import pytest

from labkit import specs
from labkit.units import gbit_per_s_to_GBps


def test_every_entry_has_a_findable_citation_and_a_known_direction():
    for s in specs.SPECS:
        assert s.source, s.name
        # a URL, or a standard's document number (IEEE Std 802.3xx-YYYY)
        assert re.search(r"https?://\S+|IEEE Std 802\.3[a-z]{2}-\d{4}", s.citation), (s.name, s.citation)
        assert s.direction in specs.DIRECTIONS and s.level in specs.LEVELS, s.name
        assert math.isfinite(s.bandwidth_GBps) and s.bandwidth_GBps > 0, s.name


def test_names_are_unique_and_every_name_finds_its_entry():
    names = [s.name for s in specs.SPECS]
    assert len(names) == len(set(names))
    for s in specs.SPECS:
        assert specs.spec(s.name) is s
    with pytest.raises(KeyError, match="matches 2 specs"):
        specs.spec("NDR")  # NDR 400 and NDR200: a lookup must name which


def test_the_systems_data_ships_have_their_entries():
    # issue 16: V100 NVLink2, H800 NVLink, B200/GB200 HBM3e, NDR200/XDR, EFA on p5, 200/400 GbE
    assert specs.spec("NVLink 2").per_direction_GBps() == 150.0
    assert specs.spec("H800").per_direction_GBps() == 200.0
    assert specs.spec("HBM3e (B200)").bandwidth_GBps == 8000.0
    assert specs.spec("HBM3e (GB200)").bandwidth_GBps == 7700.0
    assert specs.spec("NDR200").per_direction_GBps() == 25.0
    assert specs.spec("XDR").per_direction_GBps() == 100.0
    assert specs.spec("EFA (p5").per_direction_GBps() == 400.0
    assert specs.spec("Ethernet 200").per_direction_GBps() == 25.0
    assert specs.spec("Ethernet 400").per_direction_GBps() == 50.0


def test_network_rates_are_the_line_rate_over_eight_per_direction():
    for s in specs.SPECS:
        if s.level != "network":
            continue
        assert s.direction == "unidirectional", s.name
        gbit = float(re.search(r"computed: ([0-9.]+) Gb/s", s.source).group(1))
        assert s.bandwidth_GBps == gbit_per_s_to_GBps(gbit), s.name


def test_bidirectional_figures_halve_and_aggregate_ones_have_no_direction_share():
    t = specs.spec_table()
    assert len(t) == len(specs.SPECS)
    bi = t[t["quoted_as"] == "bidirectional"]
    assert (bi["per_direction_GBps"] * 2 == bi["quoted_GBps"]).all()
    assert t[t["quoted_as"] == "aggregate"]["per_direction_GBps"].isna().all()


def test_pcie_specs_are_per_direction_after_encoding():
    assert specs.pcie_spec(3).bandwidth_GBps == pytest.approx(15.75, abs=0.01)
    assert specs.pcie_spec(4).bandwidth_GBps == pytest.approx(31.51, abs=0.01)
    assert specs.pcie_spec(5).bandwidth_GBps == pytest.approx(63.02, abs=0.01)
    assert specs.pcie_spec(4, 8).bandwidth_GBps == pytest.approx(15.75, abs=0.01)
    assert all(specs.pcie_spec(g).direction == "unidirectional" for g in (3, 4, 5, 6))


def test_compare_to_spec_warns_on_direction_mismatch():
    frac, warn = specs.compare_to_spec(225.0, "unidirectional", specs.spec("NVLink 4"))
    assert frac == pytest.approx(0.5) and warn
    frac, warn = specs.compare_to_spec(25.0, "unidirectional", specs.pcie_spec(4))
    assert frac == pytest.approx(25 / 31.51, rel=1e-3) and not warn
