"""The systems of labkit's multi-node and NVLS/SHARP datasets, with their sources (cluster_model presets)."""

from __future__ import annotations

from ..specs import spec
from .cluster_system import NCCL_NVLINK_GBPS_PER_LINK, NET_EFFICIENCY, NVLS_EFFICIENCY, System


# --------------------------------------------------------------------------- systems with sources
def _per_direction(name: str) -> float:
    """One direction of a figure in labkit.specs (the spec table), in GB/s."""
    return spec(name).per_direction_GBps()


NVLINK3, NVLINK4, NVLINK5 = _per_direction("NVLink 3"), _per_direction("NVLink 4"), _per_direction("NVLink 5")
NDR, HDR, ETH100 = _per_direction("NDR 400"), _per_direction("HDR"), _per_direction("Ethernet 100")


def _nvlink_eff(arch: str, links: int, line_GBps: float) -> float:
    """NCCL's assumed NVLink rate (topo.h, per link) x links, as a share of the line rate."""
    return NCCL_NVLINK_GBPS_PER_LINK[arch] * links / line_GBps


#: The systems of labkit's multi-node and NVLS/SHARP datasets; each names its sources in `source`.
PRESETS = {
    "h100_ndr_8nic": System(
        "8x H100 SXM, 8x InfiniBand NDR 400G (ConnectX-7)",
        8,
        NVLINK4,
        8,
        NDR,
        intra_efficiency=_nvlink_eff("hopper", 18, NVLINK4),
        nic_efficiency=NET_EFFICIENCY,
        nvls=True,
        source="H100 datasheet (NVLink 900 GB/s both directions); NCCL topo.h SM90 20.6 GB/s x 18 links; "
        "nccl-tests#290 (8 HCAs, NDR); AddyLaddy 46-48 GB/s per NIC",
    ),
    "h100_ndr_8nic_sharp": System(
        "CoreWeave HGX H100: 8x NDR 400G + IB SHARP",
        8,
        NVLINK4,
        8,
        NDR,
        intra_efficiency=_nvlink_eff("hopper", 18, NVLINK4),
        nic_efficiency=NET_EFFICIENCY,
        nvls=True,
        sharp=True,
        source="coreweave/nccl-tests job spec @fb4787c: ib.coreweave.cloud/speed=3200G, ibp0..7, NCCL_ALGO=COLLNETCHAIN",
    ),
    "h200_node": System(
        "8x H200 (NVLink 4 / NVSwitch, NVLS)",
        8,
        NVLINK4,
        8,
        NDR,
        intra_efficiency=_nvlink_eff("hopper", 18, NVLINK4),
        nic_efficiency=NET_EFFICIENCY,
        nvls=True,
        nvls_min_gpus=5,
        source="H200: NVLink 4 like H100; ml-engineering: NCCL picks NVLS from 5 GPUs",
    ),
    "p4d_efa": System(
        "AWS p4d.24xlarge: 8x A100 40GB, 4x 100 Gb/s EFA",
        8,
        NVLINK3,
        4,
        _per_direction("EFA (p4d") / 4,
        intra_efficiency=_nvlink_eff("ampere", 12, NVLINK3),
        nic_efficiency=NET_EFFICIENCY,
        source="AWS P4d deep dive (400 Gbps EFA); aws-efa-eks log: NET/AWS Libfabric/0..3 GDRDMA; "
        "A100 datasheet NVLink 600 GB/s both directions; NCCL topo.h SM80 20 GB/s x 12",
    ),
    "oci_bm_gpu4_8": System(
        "OCI BM.GPU4.8: 8x A100 40GB, 16x 100 Gb/s RoCEv2",
        8,
        NVLINK3,
        16,
        ETH100,
        intra_efficiency=_nvlink_eff("ampere", 12, NVLINK3),
        nic_efficiency=NET_EFFICIENCY,
        source="ocitutorials (NCCL_IB_HCA = 16 mlx5 ports, 1.6 Tb/s); oci-hpc health check lists 16 mlx5 devices",
    ),
    "alps_gh200": System(
        "CSCS Alps: 4x GH200, 4x Slingshot-11 200 Gb/s",
        4,
        NVLINK4,
        4,
        25.0,
        intra_efficiency=_nvlink_eff("hopper", 18, NVLINK4),
        nic_efficiency=NET_EFFICIENCY,
        nvls=False,
        source="cscs-docs gh200-schematic.svg: GPU all2all 3x6 NVLink 150 GB/s per direction per pair, "
        "Slingshot hsn0..3 200Gb/s (25GB/s); no NVSwitch",
    ),
    "p6_b200_efa": System(
        "AWS p6-b200.48xlarge: 8x B200, 8x 400 Gb/s EFA v4",
        8,
        NVLINK5,
        8,
        50.0,
        intra_efficiency=_nvlink_eff("blackwell", 18, NVLINK5),
        nic_efficiency=NET_EFFICIENCY,
        nvls=True,
        nvls_efficiency=NVLS_EFFICIENCY["blackwell"],
        nvls_min_gpus=6,
        source="ml-engineering: 8 EFA devices at 400 Gb/s (3.2 Tbps); NVLink 5 1.8 TB/s both directions; "
        "NCCL topo.h SM100 40.1 x 18; NVLS from 6 GPUs on this node (measured)",
    ),
    "gb200_nvl72_rack": System(
        "GB200 NVL72 rack as one NVLink domain: 72 GPUs, 72x 400 Gb/s IB (one per GPU)",
        72,
        NVLINK5,
        72,
        NDR,
        intra_efficiency=_nvlink_eff("blackwell", 18, NVLINK5),
        nic_efficiency=NET_EFFICIENCY,
        nvls=True,
        nvls_efficiency=NVLS_EFFICIENCY["blackwell"],
        source="NVL72: 18 trays x 4 GPUs, 4x ConnectX-7 per tray (MLCommons GB200 system description); "
        "NIC count of the CoreWeave run not published: an assumption",
    ),
    "gb200_tray4": System(
        "Azure ND GB200 v6: the 4 GPUs of one host",
        4,
        NVLINK5,
        4,
        50.0,
        intra_efficiency=_nvlink_eff("blackwell", 18, NVLINK5),
        nic_efficiency=NET_EFFICIENCY,
        nvls=True,
        nvls_efficiency=NVLS_EFFICIENCY["blackwell"],
        nvls_min_gpus=5,
        source="4 GPUs only: below NVLS's multicast threshold, ring (the page says Ring)",
    ),
    "a100_node": System(
        "8x A100 SXM (NVLink 3 / NVSwitch, no NVLS)",
        8,
        NVLINK3,
        8,
        HDR,
        intra_efficiency=_nvlink_eff("ampere", 12, NVLINK3),
        nic_efficiency=NET_EFFICIENCY,
        source="A100 datasheet; NCCL topo.h SM80",
    ),
}


def preset(name: str) -> System:
    if name not in PRESETS:
        raise KeyError(f"unknown preset {name!r}; choose one of {sorted(PRESETS)}")
    return PRESETS[name]
