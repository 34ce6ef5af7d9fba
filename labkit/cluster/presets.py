"""Named systems (one namespace): the node types of labkit's multi-node and NVLS/SHARP datasets, each with
its sources. Line rates come from `labkit.specs`; NCCL's view of them from `labkit.cluster.nccl`."""

from __future__ import annotations

import difflib

from .system import System, system_from_facts

_F = system_from_facts

#: name -> System. Every fact cites where it is stated (`System.source`).
PRESETS: dict[str, System] = {
    "h100_ndr_8nic": _F(
        gpus_per_node=8,
        gpu="H100",
        nics_per_node=8,
        nic_GBps=50.0,
        nvls=True,
        name="8x H100 SXM, 8x InfiniBand NDR 400G",
        source="H100 SXM: NVLink 4, 18 links (spec table); nccl-tests#290: 8 HCAs, NDR 400 Gb/s",
    ),
    "h100_ndr_8nic_sharp": _F(
        gpus_per_node=8,
        gpu="H100",
        nics_per_node=8,
        nic_GBps=50.0,
        nvls=True,
        sharp=True,
        name="CoreWeave HGX H100: 8x NDR 400G + IB SHARP",
        source="coreweave/nccl-tests job spec @fb4787c: ib.coreweave.cloud/speed=3200G, ibp0..7, "
        "NCCL_COLLNET_ENABLE=1, NCCL_ALGO=COLLNETCHAIN",
    ),
    "h100_roce_8nic": _F(
        gpus_per_node=8,
        gpu="H100",
        nics_per_node=8,
        nic_GBps=50.0,
        nvls=True,
        name="8x H100 SXM, 8x 400 Gb/s RoCE",
        source="NVIDIA/nccl#1221 (the user's system: 8xH100, 8x400Gb RoCE, NCCL 2.19.3)",
    ),
    "h200_node": _F(
        gpus_per_node=8,
        gpu="H200",
        nics_per_node=8,
        nic_GBps=50.0,
        nvls=True,
        name="8x H200 (NVLink 4 / NVSwitch, NVLS)",
        source="H200: NVLink 4 like H100 (spec table)",
    ),
    "h800_100g_8nic": _F(
        gpus_per_node=8,
        gpu="H800",
        nics_per_node=8,
        nic_GBps=12.5,
        nvls=True,
        name="8x H800, 8x 100 Gb/s ConnectX-6",
        source="NVIDIA/nccl-tests#153 (the user's system); H800 NVLink 8 links (DeepSeek-V3#28, spec table)",
    ),
    "a100_hdr_8nic": _F(
        gpus_per_node=8,
        gpu="A100",
        nics_per_node=8,
        nic_GBps=25.0,
        name="DGX A100: 8x A100 SXM, 8x InfiniBand HDR 200G",
        source="DGX A100 user guide: 8 HDR HCAs for compute",
    ),
    "dgx_a100_100g_8nic": _F(
        gpus_per_node=8,
        gpu="A100",
        nics_per_node=8,
        nic_GBps=12.5,
        name="DGX A100 with 8x 100 Gb/s NICs",
        source="NVIDIA/nccl#812 (the reporter: 'standard DGX A100 platform, each node has 8 x 100Gbps NICs')",
    ),
    "a800_hdr_1nic": _F(
        gpus_per_node=8,
        gpu="A800",
        nics_per_node=1,
        nic_GBps=25.0,
        name="8x A800, one InfiniBand HDR 200G",
        source="NVIDIA/nccl#412 (the user's system)",
    ),
    "p4d_efa": _F(
        gpus_per_node=8,
        gpu="A100",
        nics_per_node=4,
        nic_GBps=12.5,
        name="AWS p4d.24xlarge: 8x A100 40GB, 4x 100 Gb/s EFA",
        source="AWS P4d (400 Gbps EFA, 4 adapters); aws-efa-eks log: NET/AWS Libfabric/0..3 GDRDMA",
    ),
    "p4dn_efa": _F(
        gpus_per_node=8,
        gpu="A100",
        nics_per_node=4,
        nic_GBps=12.5,
        name="AWS 'p4dn.24xlarge' (nccl#527's word), modelled as p4d.24xlarge: 8x A100, 4x 100 Gb/s EFA (assumed)",
        source="NVIDIA/nccl#527 (a commenter's runs; 8 ranks per instance fixed by busbw/algbw); GPU and EFA count not "
        "stated there: AWS P4d's 8x A100 and 400 Gbps EFA (4 adapters) assumed",
    ),
    "oci_bm_gpu4_8": _F(
        gpus_per_node=8,
        gpu="A100",
        nics_per_node=16,
        nic_GBps=12.5,
        name="OCI BM.GPU4.8: 8x A100 40GB, 16x 100 Gb/s RoCEv2",
        source="ocitutorials (NCCL_IB_HCA = 16 mlx5 ports, 1.6 Tb/s)",
    ),
    "alps_gh200": _F(
        gpus_per_node=4,
        gpu="GH200",
        nics_per_node=4,
        nic_GBps=25.0,
        cpu="arm",
        name="CSCS Alps: 4x GH200, 4x Slingshot-11 200 Gb/s",
        source="cscs-docs gh200 schematic: GPUs all-to-all over NVLink, no NVSwitch; Slingshot hsn0..3 200 Gb/s",
    ),
    "p6_b200_efa": _F(
        gpus_per_node=8,
        gpu="B200",
        nics_per_node=8,
        nic_GBps=50.0,
        nvls=True,
        name="AWS p6-b200.48xlarge: 8x B200, 8x 400 Gb/s EFA v4",
        source="ml-engineering: 8 EFA devices at 400 Gb/s (3.2 Tbps); NVLink 5",
    ),
    "gb200_nvl72_rack": _F(
        gpus_per_node=72,
        gpu="GB200",
        nics_per_node=72,
        nic_GBps=50.0,
        nvls=True,
        cpu="arm",
        name="GB200 NVL72 rack as one NVLink domain: 72 GPUs, 72x 400 Gb/s (assumed)",
        source="NVL72: 18 trays x 4 GPUs, 4x ConnectX-7 per tray (MLCommons GB200 system description); "
        "the CoreWeave run's NIC count is not published: an assumption",
    ),
    "gb200_tray4": _F(
        gpus_per_node=4,
        gpu="GB200",
        nics_per_node=4,
        nic_GBps=50.0,
        nvls=True,
        cpu="arm",
        name="Azure ND GB200 v6: the 4 GPUs of one host",
        source="Azure AI benchmarking guide (4 GPUs per VM)",
    ),
    "a100_node": _F(
        gpus_per_node=8,
        gpu="A100",
        nics_per_node=8,
        nic_GBps=25.0,
        name="8x A100 SXM (NVLink 3 / NVSwitch, no NVLS)",
        source="A100 datasheet (spec table)",
    ),
}


def preset(name: str) -> System:
    """The named system; an unknown name gets the three closest names."""
    if name not in PRESETS:
        close = difflib.get_close_matches(str(name).lower().replace(" ", "_"), list(PRESETS), n=3, cutoff=0.0)
        raise KeyError(f"unknown system {name!r}; closest: {', '.join(close)} (all: labkit.cluster.PRESETS)")
    return PRESETS[name]
