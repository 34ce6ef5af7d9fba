"""The interconnect and memory spec table: every published peak with its direction and a findable citation.

Each entry says what one figure covers (`per`), whether it counts one direction or both (`direction`),
the document it comes from (`source`: document name and what it states) and where to find that document
(`citation`: a URL or a standard's number). A figure computed from a document (a Gb/s line rate in GB/s,
a system total divided by its GPUs) says "computed" and shows the arithmetic. Compare a measurement only
with a figure of the same direction: `compare_to_spec` warns otherwise.
"""

from __future__ import annotations

import dataclasses

from .units import gbit_per_s_to_GBps

DIRECTIONS = ("unidirectional", "bidirectional", "aggregate")
LEVELS = ("gpu_memory", "gpu_gpu", "host_gpu", "network", "host_memory")


@dataclasses.dataclass(frozen=True)
class Spec:
    """A published peak figure, with its direction, what it covers and where it comes from."""

    name: str
    bandwidth_GBps: float
    direction: str  # "unidirectional" (per direction), "bidirectional" (sum of both), "aggregate" (reads + writes)
    level: str  # one of LEVELS
    per: str  # what one figure covers: "x16 link, one direction", "GPU, all links", "port, one direction", ...
    source: str  # the document and what it states
    citation: str  # where to find it: a URL, or a standard's document number

    def per_direction_GBps(self) -> float:
        """The figure one direction of the link carries (bidirectional figures halved)."""
        if self.direction == "bidirectional":
            return self.bandwidth_GBps / 2
        return self.bandwidth_GBps


# Where the documents are. Product pages carry the current datasheet's figures in their spec tables.
_PCI_SIG = "PCI-SIG specifications library, https://pcisig.com/specifications"
_A100 = "https://www.nvidia.com/en-us/data-center/a100/"
_H100 = "https://www.nvidia.com/en-us/data-center/h100/"
_H200 = "https://www.nvidia.com/en-us/data-center/h200/"
_DGX1_V100 = "http://images.nvidia.com/content/pdf/dgx1-v100-system-architecture-whitepaper.pdf"
_DGX_B200 = "https://www.nvidia.com/en-us/data-center/dgx-b200/"
_VERDA_GB300 = "https://verda.com/blog/gb300-nvl72-architecture"
_GH200 = "https://www.nvidia.com/en-us/data-center/grace-hopper-superchip/"
_NDR_GUIDE = "https://docs.nvidia.com/dgx-superpod/design-guide-cabling-data-centers/latest/ndr-overview.html"
_CX8_NOTES = "https://docs.nvidia.com/networking/display/connectx8firmwarev40440208/changes+and+new+features"
_EC2_BANDWIDTH = "https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/ec2-instance-network-bandwidth.html"


def _pcie(gen: int, gts: float, encoding: float, enc_text: str) -> Spec:
    # 16 lanes × GT/s × encoding efficiency / 8 bits per byte, per direction.
    return Spec(
        f"PCIe Gen{gen} x16",
        round(16 * gts * encoding / 8, 2),
        "unidirectional",
        "host_gpu",
        "x16 link, one direction",
        f"PCI Express Base Specification Revision {gen}.0: {gts:g} GT/s per lane, {enc_text}; computed as "
        "16 lanes × rate × encoding / 8 bits (packet headers cost a further ~10-20% in practice)",
        _PCI_SIG,
    )


def _network(name: str, gbit_per_s: float, per: str, source: str, citation: str) -> Spec:
    # Network line rates are quoted in Gb/s per direction (links are full duplex): ÷ 8 bits per byte.
    return Spec(
        name,
        gbit_per_s_to_GBps(gbit_per_s),
        "unidirectional",
        "network",
        per,
        f"{source}; computed: {gbit_per_s:g} Gb/s ÷ 8 = {gbit_per_s_to_GBps(gbit_per_s):g} GB/s",
        citation,
    )


SPECS: tuple[Spec, ...] = (
    _pcie(3, 8.0, 128 / 130, "128b/130b encoding"),
    _pcie(4, 16.0, 128 / 130, "128b/130b encoding"),
    _pcie(5, 32.0, 128 / 130, "128b/130b encoding"),
    _pcie(6, 64.0, 242 / 256, "PAM4 FLIT mode, 242 of 256 flit bytes outside FEC/CRC"),
    # ---- GPU ↔ GPU: NVIDIA quotes NVLink as the sum of both directions.
    Spec(
        "NVLink 2 (V100 SXM2, 6 links)",
        300.0,
        "bidirectional",
        "gpu_gpu",
        "GPU, all links",
        "NVIDIA, 'DGX-1 With Tesla V100 System Architecture' whitepaper: six NVLink 2.0 links per V100 of "
        "25 GB/s per direction, 300 GB/s in total bi-directional (Alibaba Cloud's ACK GPU-topology docs give "
        "the same 25 GB/s one way, 50 GB/s two ways per link)",
        _DGX1_V100,
    ),
    Spec(
        "NVLink 3 (A100 SXM, 12 links)",
        600.0,
        "bidirectional",
        "gpu_gpu",
        "GPU, all links",
        "NVIDIA A100 Tensor Core GPU datasheet / product page: NVLink 600 GB/s (sum of both directions)",
        _A100,
    ),
    Spec(
        "NVLink 4 (H100 SXM, 18 links)",
        900.0,
        "bidirectional",
        "gpu_gpu",
        "GPU, all links",
        "NVIDIA H100 Tensor Core GPU datasheet / product page: NVLink 900 GB/s (sum of both directions)",
        _H100,
    ),
    Spec(
        "H800 SXM NVLink (8 links)",
        400.0,
        "bidirectional",
        "gpu_gpu",
        "GPU, all links",
        "DeepSeek engineer in DeepSeek-V3 issue #28: '400GB/s 是双向理论值' (400 GB/s is the bidirectional "
        "theoretical value), beside 160 GB/s measured one way (dataset h800_nvlink_vs_ib_deepseek_v3_issue28_points); "
        "no NVIDIA datasheet for the H800 was among the sources searched",
        "https://github.com/deepseek-ai/DeepSeek-V3/issues/28",
    ),
    Spec(
        "NVLink bridge (H100 PCIe pair)",
        600.0,
        "bidirectional",
        "gpu_gpu",
        "GPU pair",
        "NVIDIA H100 datasheet / product page, H100 PCIe/NVL: NVLink bridge 600 GB/s (sum of both directions)",
        _H100,
    ),
    Spec(
        "NVLink 5 (B200, 18 links)",
        1800.0,
        "bidirectional",
        "gpu_gpu",
        "GPU, all links",
        "NVIDIA DGX B200 datasheet / product page: fifth-generation NVLink, 1.8 TB/s per GPU (sum of both "
        "directions; 14.4 TB/s for the 8 GPUs)",
        _DGX_B200,
    ),
    # ---- host ↔ GPU beyond PCIe
    Spec(
        "NVLink-C2C (GH200 CPU-GPU)",
        900.0,
        "bidirectional",
        "host_gpu",
        "superchip",
        "NVIDIA GH200 Grace Hopper Superchip datasheet / product page: NVLink-C2C 900 GB/s (sum of both directions)",
        _GH200,
    ),
    # ---- GPU memory: HBM peaks count reads and writes together; a copy moves each byte twice.
    Spec(
        "HBM2e (A100 80GB SXM)",
        2039.0,
        "aggregate",
        "gpu_memory",
        "GPU",
        "NVIDIA A100 datasheet / product page: GPU memory bandwidth 2,039 GB/s (80GB SXM; reads + writes)",
        _A100,
    ),
    Spec(
        "HBM3 (H100 SXM)",
        3350.0,
        "aggregate",
        "gpu_memory",
        "GPU",
        "NVIDIA H100 datasheet / product page: GPU memory bandwidth 3.35 TB/s (SXM; reads + writes)",
        _H100,
    ),
    Spec(
        "HBM3e (H200)",
        4800.0,
        "aggregate",
        "gpu_memory",
        "GPU",
        "NVIDIA H200 datasheet / product page: GPU memory bandwidth 4.8 TB/s (reads + writes)",
        _H200,
    ),
    Spec(
        "HBM3e (B200)",
        8000.0,
        "aggregate",
        "gpu_memory",
        "GPU",
        "NVIDIA DGX B200 datasheet / product page: 1,440 GB HBM3e, 64 TB/s HBM3e bandwidth for 8 GPUs; "
        "computed: 64 ÷ 8 = 8 TB/s per GPU (reads + writes). The 180 GB B200 is listed at 7.7 TB/s in Verda's table (see HBM3e (GB200))",
        _DGX_B200,
    ),
    Spec(
        "HBM3e (GB200)",
        7700.0,
        "aggregate",
        "gpu_memory",
        "GPU",
        "Verda (GPU cloud) per-GPU specification table, 'NVIDIA GB300 NVL72: GPU Architecture & Performance': "
        "GB200 GPU memory bandwidth 7.7 TB/s (reads + writes). A secondary source: NVIDIA's own GB200 page was "
        "not among the sources searched",
        _VERDA_GB300,
    ),
    # ---- network: per port (or per node for cloud instances), per direction
    _network(
        "InfiniBand HDR 200 Gb/s",
        200,
        "port, one direction",
        "NVIDIA DGX SuperPOD cabling guide, 'NDR Overview': HDR is four lanes of 50 Gbps",
        _NDR_GUIDE,
    ),
    _network(
        "InfiniBand NDR200 200 Gb/s",
        200,
        "port, one direction",
        "NVIDIA DGX SuperPOD cabling guide, 'NDR Overview': '200 Gbps (two lanes of 100 Gbps) ... referred "
        "to as NDR200'",
        _NDR_GUIDE,
    ),
    _network(
        "InfiniBand NDR 400 Gb/s",
        400,
        "port, one direction",
        "NVIDIA DGX SuperPOD cabling guide, 'NDR Overview': 'Link speeds of 400 Gbps (four lanes of 100 Gbps)'",
        _NDR_GUIDE,
    ),
    _network(
        "InfiniBand XDR 800 Gb/s",
        800,
        "port, one direction",
        "NVIDIA ConnectX-8 SuperNIC firmware release notes v40.44.0208: 'supports 800Gb/s or XDR IB or "
        "2 x 400GbE link speeds'",
        _CX8_NOTES,
    ),
    _network(
        "Ethernet 100 Gb/s",
        100,
        "port, one direction",
        "IEEE Std 802.3ba-2010, 40 Gb/s and 100 Gb/s Ethernet (full duplex)",
        "IEEE Std 802.3ba-2010",
    ),
    _network(
        "Ethernet 200 Gb/s",
        200,
        "port, one direction",
        "IEEE Std 802.3bs-2017, 200 Gb/s and 400 Gb/s Ethernet (full duplex)",
        "IEEE Std 802.3bs-2017",
    ),
    _network(
        "Ethernet 400 Gb/s",
        400,
        "port, one direction",
        "IEEE Std 802.3bs-2017, 200 Gb/s and 400 Gb/s Ethernet (full duplex)",
        "IEEE Std 802.3bs-2017",
    ),
    _network(
        "AWS EFA (p4d, 4x100 Gb/s)",
        400,
        "node, one direction",
        "Amazon EC2 P4 instances: p4d.24xlarge, 400 Gbps networking with EFA; EC2 network bandwidth "
        f"'appl[ies] to both inbound and outbound traffic' ({_EC2_BANDWIDTH})",
        "https://aws.amazon.com/ec2/instance-types/p4/",
    ),
    _network(
        "AWS EFA (p5, 32x100 Gb/s)",
        3200,
        "node, one direction",
        "Amazon EC2 User Guide, 'Maximize network bandwidth on accelerated computing instances with EFA': "
        "P5 and P5e instances support up to 32 network cards and up to 3,200 Gbps of network bandwidth; "
        f"bandwidth applies to inbound and outbound traffic each ({_EC2_BANDWIDTH})",
        "https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/p5-efa.html",
    ),
)


def spec(name: str) -> Spec:
    """Look a spec up by (a unique part of) its name, e.g. spec('Gen4'), spec('NDR 400')."""
    hits = [s for s in SPECS if name.lower() in s.name.lower()]
    if len(hits) != 1:
        names = ", ".join(s.name for s in SPECS)
        raise KeyError(f"{name!r} matches {len(hits)} specs; known: {names}")
    return hits[0]


def pcie_spec(gen: int, width: int = 16) -> Spec:
    """PCIe per-direction peak for a generation and link width (scaled from the x16 figure)."""
    if width not in (1, 2, 4, 8, 16):
        raise ValueError(f"PCIe width must be 1, 2, 4, 8 or 16, got {width}")
    s = spec(f"PCIe Gen{gen} x16")
    if width == 16:
        return s
    return dataclasses.replace(
        s,
        name=f"PCIe Gen{gen} x{width}",
        bandwidth_GBps=round(s.bandwidth_GBps * width / 16, 2),
        per=f"x{width} link, one direction",
    )


def compare_to_spec(measured_GBps: float, measured_direction: str, s: Spec) -> tuple[float, list[str]]:
    """Fraction of spec reached, with a warning when the directions differ (and the fix applied)."""
    warnings = []
    peak = s.bandwidth_GBps
    if measured_direction != s.direction:
        if measured_direction == "unidirectional" and s.direction == "bidirectional":
            peak = s.per_direction_GBps()
            warnings.append(
                f"{s.name} is quoted as {s.bandwidth_GBps:g} GB/s bidirectional; "
                f"compared with its per-direction {peak:g} GB/s instead"
            )
        else:
            warnings.append(
                f"comparing a {measured_direction} measurement with a {s.direction} spec ({s.name}); "
                "the ratio is not meaningful"
            )
    return measured_GBps / peak, warnings


def spec_table():
    """The whole table as a DataFrame: the figure as quoted, its direction, one direction's share, the citation."""
    import pandas as pd

    return pd.DataFrame(
        [
            {
                "spec": s.name,
                "level": s.level,
                "quoted_GBps": s.bandwidth_GBps,
                "quoted_as": s.direction,
                "per_direction_GBps": s.per_direction_GBps() if s.direction != "aggregate" else float("nan"),
                "per": s.per,
                "citation": s.citation,
            }
            for s in SPECS
        ]
    )
