"""Named systems (one namespace): the node types of labkit's multi-node and NVLS/SHARP datasets, each with
its sources. Line rates come from `labkit.specs`; NCCL's view of them from `labkit.cluster.nccl`."""

from __future__ import annotations

import difflib

from .system import System, system_from_facts

# fmt: off
#: name -> (GPUs per node, GPU, NICs per node, GB/s per NIC per direction, features, name, source), one system a
#: row; features: "nvls" (NVLink SHARP), "sharp" (InfiniBand SHARP, CollNet), "arm" (an Arm host CPU).
#: Every fact cites where it is stated (`System.source`).
_TABLE = {
    "h100_ndr_8nic":       (8, "H100", 8, 50.0, "nvls",
                           "8x H100 SXM, 8x InfiniBand NDR 400G",
                           "H100 SXM: NVLink 4, 18 links (spec table); nccl-tests#290: 8 HCAs, NDR 400 Gb/s"),
    "h100_ndr_8nic_sharp": (8, "H100", 8, 50.0, "nvls sharp",
                           "CoreWeave HGX H100: 8x NDR 400G + IB SHARP",
                           "coreweave/nccl-tests job spec @fb4787c: ib.coreweave.cloud/speed=3200G, ibp0..7, "
                           "NCCL_COLLNET_ENABLE=1, NCCL_ALGO=COLLNETCHAIN"),
    "h100_roce_8nic":      (8, "H100", 8, 50.0, "nvls",
                           "8x H100 SXM, 8x 400 Gb/s RoCE",
                           "NVIDIA/nccl#1221 (the user's system: 8xH100, 8x400Gb RoCE, NCCL 2.19.3)"),
    "h200_node":           (8, "H200", 8, 50.0, "nvls",
                           "8x H200 (NVLink 4 / NVSwitch, NVLS)",
                           "H200: NVLink 4 like H100 (spec table)"),
    "h800_100g_8nic":      (8, "H800", 8, 12.5, "nvls",
                           "8x H800, 8x 100 Gb/s ConnectX-6",
                           "NVIDIA/nccl-tests#153 (the user's system); H800 NVLink 8 links (DeepSeek-V3#28, spec "
                           "table)"),
    "a100_hdr_8nic":       (8, "A100", 8, 25.0, "",
                           "DGX A100: 8x A100 SXM, 8x InfiniBand HDR 200G",
                           "DGX A100 user guide: 8 HDR HCAs for compute"),
    "dgx_a100_100g_8nic":  (8, "A100", 8, 12.5, "",
                           "DGX A100 with 8x 100 Gb/s NICs",
                           "NVIDIA/nccl#812 (the reporter: 'standard DGX A100 platform, each node has 8 x 100Gbps "
                           "NICs')"),
    "a800_hdr_1nic":       (8, "A800", 1, 25.0, "",
                           "8x A800, one InfiniBand HDR 200G",
                           "NVIDIA/nccl#412 (the user's system)"),
    "p4d_efa":             (8, "A100", 4, 12.5, "",
                           "AWS p4d.24xlarge: 8x A100 40GB, 4x 100 Gb/s EFA",
                           "AWS P4d (400 Gbps EFA, 4 adapters); aws-efa-eks log: NET/AWS Libfabric/0..3 GDRDMA"),
    "p4dn_efa":            (8, "A100", 4, 12.5, "",
                           "AWS 'p4dn.24xlarge' (nccl#527's word), modelled as p4d.24xlarge: 8x A100, 4x 100 Gb/s EFA "
                           "(assumed)",
                           "NVIDIA/nccl#527 (a commenter's runs; 8 ranks per instance fixed by busbw/algbw); GPU and "
                           "EFA count not stated there: AWS P4d's 8x A100 and 400 Gbps EFA (4 adapters) assumed"),
    "oci_bm_gpu4_8":       (8, "A100", 16, 12.5, "",
                           "OCI BM.GPU4.8: 8x A100 40GB, 16x 100 Gb/s RoCEv2",
                           "ocitutorials (NCCL_IB_HCA = 16 mlx5 ports, 1.6 Tb/s)"),
    "alps_gh200":          (4, "GH200", 4, 25.0, "arm",
                           "CSCS Alps: 4x GH200, 4x Slingshot-11 200 Gb/s",
                           "cscs-docs gh200 schematic: GPUs all-to-all over NVLink, no NVSwitch; Slingshot hsn0..3 200 "
                           "Gb/s"),
    "p6_b200_efa":         (8, "B200", 8, 50.0, "nvls",
                           "AWS p6-b200.48xlarge: 8x B200, 8x 400 Gb/s EFA v4",
                           "ml-engineering: 8 EFA devices at 400 Gb/s (3.2 Tbps); NVLink 5"),
    "gb200_nvl72_rack":    (72, "GB200", 72, 50.0, "nvls arm",
                           "GB200 NVL72 rack as one NVLink domain: 72 GPUs, 72x 400 Gb/s (assumed)",
                           "NVL72: 18 trays x 4 GPUs, 4x ConnectX-7 per tray (MLCommons GB200 system description); the "
                           "CoreWeave run's NIC count is not published: an assumption"),
    "gb200_tray4":         (4, "GB200", 4, 50.0, "nvls arm",
                           "Azure ND GB200 v6: the 4 GPUs of one host",
                           "Azure AI benchmarking guide (4 GPUs per VM)"),
    "a100_node":           (8, "A100", 8, 25.0, "",
                           "8x A100 SXM (NVLink 3 / NVSwitch, no NVLS)",
                           "A100 datasheet (spec table)"),
}
# fmt: on

#: name -> System.
PRESETS: dict[str, System] = {
    key: system_from_facts(
        gpus_per_node=gpus,
        gpu=gpu,
        nics_per_node=nics,
        nic_GBps=nic_GBps,
        nvls="nvls" in features.split(),
        sharp="sharp" in features.split(),
        cpu="arm" if "arm" in features.split() else "intel",
        name=name,
        source=source,
    )
    for key, (gpus, gpu, nics, nic_GBps, features, name, source) in _TABLE.items()
}


def preset(name: str) -> System:
    """The named system; an unknown name gets the three closest names."""
    if name not in PRESETS:
        close = difflib.get_close_matches(str(name).lower().replace(" ", "_"), list(PRESETS), n=3, cutoff=0.0)
        raise KeyError(f"unknown system {name!r}; closest: {', '.join(close)} (all: labkit.cluster.PRESETS)")
    return PRESETS[name]
