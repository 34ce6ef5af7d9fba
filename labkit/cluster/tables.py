"""NCCL's tuning constants, copied from NVIDIA/nccl at commit 5067397c (NCCL 2.30.7): tuning.cc, search.cc,
topo.h, device.h, init.cc (cited per table). Used by labkit.cluster.nccl; NCCL's *model* constants, not measurements."""

from __future__ import annotations

NCCL_VERSION = "2.30.7"
NCCL_COMMIT = "5067397c2676d5aed50042fc39e5c8ee96eb0027"
SOURCE = f"NVIDIA/nccl@{NCCL_COMMIT[:8]} (NCCL {NCCL_VERSION}): src/graph/tuning.cc, search.cc, topo.h"

ARCHS = ("volta", "ampere", "hopper", "blackwell")
#: tuning.cc:263-266 compCapIndex
_CC = {"volta": 0, "ampere": 1, "hopper": 2, "blackwell": 3}
#: compute capability per architecture (for the rules that test minCompCap)
COMPCAP = {"volta": 70, "ampere": 80, "hopper": 90, "blackwell": 100}

ALGOS = ("tree", "ring", "collnet_direct", "collnet_chain", "nvls", "nvls_tree", "pat")  # NCCL's order
PROTOS = ("ll", "ll128", "simple")
_A = {a: i for i, a in enumerate(ALGOS)}
_P = {p: i for i, p in enumerate(PROTOS)}

#: topo.h:19-24: NCCL's NVLink bandwidth per link, GB/s per direction
NVLINK_PER_LINK_GBPS = {"volta": 20.0, "ampere": 20.0, "hopper": 20.6, "blackwell": 40.1}
#: topo.cc kvDictPciGen ÷ 80 × 16 lanes: NCCL's rate of a x16 PCIe link, GB/s
PCIE_X16_GBPS = {3: 12.0, 4: 24.0, 5: 48.0, 6: 96.0}

#: tuning.cc:139-144 nvlsEfficiency
NVLS_EFFICIENCY = {"volta": 0.0, "ampere": 0.0, "hopper": 0.85, "blackwell": 0.74}

#: tuning.cc:149-176 baseLatencies [algo][proto] and hwLatencies [hw][algo][proto], µs: one (ll, ll128, simple)
#: triple per algorithm, in ALGOS' order, as tuning.cc lays them out
# fmt: off
_BASE_LAT = ((6.8, 14.0, 8.4), (6.6, 14.0, 8.4), (0, 0, 0), (0, 0, 0), (0, 0, 0), (0, 0, 0), (8.0, 8.0, 8.0))
_HW_LAT = {
    "nvlink": ((0.6, 1.25, 4.0), (0.6, 1.9, 3.4), (0, 0, 3.7), (0, 0, 2.8), (0, 0, 25), (0, 0, 25), (0, 0, 4.0)),
    "pci":    ((1.0, 1.9, 4.0), (1.0, 2.5, 5.7), (0, 0, 3.7), (0, 0, 2.8), (0, 0, 0), (0, 0, 0), (0, 0, 4.0)),
    "net":    ((5.0, 8.5, 14), (2.7, 4.0, 14.0), (0, 0, 31), (0, 0, 30), (0, 0, 18), (0, 0, 20.9), (0, 0, 14)),
}
# fmt: on
BASE_LAT = dict(zip(ALGOS, _BASE_LAT, strict=True))
HW_LAT = {hw: dict(zip(ALGOS, row, strict=True)) for hw, row in _HW_LAT.items()}
#: tuning.cc:177-211, indexed [compCapIndex or CPU row][min(nNodes,3)-1]
LL_MAX_BWS = ((39.0, 39.0, 20.4), (87.7, 22.5, 19.0), (141.0, 45.0, 35.0), (2 * 141.0, 2 * 45.0, 2 * 35.0))
PER_CH_MAX_RING_LL128 = ((20.0, 20.0, 20.0), (20.0, 20.0, 20.0), (36.7, 36.7, 36.7), (40.0, 40.0, 40.0))
PER_CH_MAX_TREE_LL128 = ((20.0, 20.0, 20.0), (20.0, 20.0, 20.0), (36.7, 36.7, 29.0), (55.6, 31.67, 20.0))
PER_CH_MAX_TREE = ((26.5, 18.5, 10.0), (24.0, 23.6, 17.8), (38.7, 41.4, 36.0), (70.0, 42.8, 24.0))
PER_CH_MAX_NVLS_TREE = ((26.5, 18.5, 10.0), (24.0, 23.6, 17.8), (0.0, 57.7, 45.5), (0.0, 96.0, 80.0))
#: tuning.cc:620-628 treeCorrectionFactor [proto][log2(bytes/64)], 64 B .. 256 MiB
# fmt: off
TREE_CORRECTION = (  # one row per protocol (ll, ll128, simple), as tuning.cc lays it out
    (1.0, 1.0, 1.0, 1.0, 0.9, 0.8, 0.7, 0.7, 0.7, 0.7, 0.6, 0.5, 0.4, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.0, 1.0, 1.0, 1.0),
    (1.0, 1.0, 1.0, 1.0, 1.0, 0.9, 0.8, 0.8, 0.8, 0.7, 0.6, 0.6, 0.6, 0.6, 0.6, 0.6, 0.8, 0.9, 0.9, 0.9, 0.9, 1.0, 1.0, 1.0),
    (0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.8, 0.7, 0.6, 0.6, 0.5, 0.5, 0.5, 0.5, 0.6, 0.7, 0.8, 0.7, 0.7, 0.8, 0.9, 0.9, 0.9),
)
# fmt: on

#: search.cc:1051-1065: the per-channel speeds the search tries, GB/s, fastest first
SPEEDS_INTRA = {
    "volta": (40.0, 30.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0, 3.0),
    "ampere": (40.0, 30.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0, 3.0),
    "hopper": (60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 15.0, 12.0, 11.0, 6.0, 3.0),
    "blackwell": (90.0, 80.0, 70.0, 60.0, 50.0, 45.0, 40.0, 30.0, 24.0, 20.0, 19.0, 18.0),
}
_INTER_OLD = (48.0, 30.0, 28.0, 24.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0, 3.0, 2.4, 1.2, 0.24, 0.12)
# fmt: off
SPEEDS_INTER = {
    "volta": _INTER_OLD,
    "ampere": _INTER_OLD,
    "hopper": (48.0, 45.0, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5, 15.0, 12.0, 6.0, 3.0, 2.4, 1.2, 0.24, 0.12),
    "blackwell": (96.0, 86.0, 80.0, 48.0, 45.1, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5, 15.0, 12.0, 6.0, 3.0, 2.4,
                  1.2, 0.24, 0.12),
}
# fmt: on
MAXCHANNELS = 64  # device.h:91
RING_MAX_CHANNELS = MAXCHANNELS // 2  # init.cc:1177
NVLS_MAX_ARITY = 32  # device.h:213
DIRECT_MAX_ARITY = 7  # device.h:199
#: CollNet is turned off on fewer nodes than NCCL_COLLNET_NODE_THRESHOLD, default 2 (init.cc:857, :1469-1476).
COLLNET_NODE_THRESHOLD = 2
