"""Copies between host and GPU memory (notebooks 01 and 02): sweeps, latency curves, pinned vs pageable.

- `sweeps`: host↔device and host-memory copy sweeps (a `Sweep` of `timing.Measurement`s per size);
- `curves`: copy time against size as `Curve`s (live or recorded), their α-β fits and figures (nb 01);
- `pinned`: capped pinned allocation; `pinned_vs_pageable`: the recorded speed-up of pinning, drawn;
- `pin_cost`: what `pin_memory()` costs and when it pays; `dataloader`: `DataLoader(pin_memory=...)`;
- `placement`: recorded NUMA / shared-root-complex effects on host DMA; `numa`: host copies with the memory
  on the thread's own NUMA node vs another, measured here;
- `pitfall`: reading a non_blocking D2H copy too early; `fidelity`: labkit's timer against raw CUDA;
- `small_copy`: small host↔GPU copies timed the way the CUDA tools do (the latency floor);
- `directions`: H2D against D2H on every shipped system; `host_memory`: the kinds of host memory a GPU can
  reach, each with a number and its source; `link_health`: PCIe replay counters and CUDA vs PCI device order;
- `latency_lesson`: what notebook 01 shows, section by section, as results `Session.present` shows and records;
- `pinned_lesson`: what notebook 02 shows, section by section, as results `Session.present` shows and records;
- `bench_copy`, `bench_host`, `bench_pinned`, `bench_fidelity`: `labkit bench` / `labkit record`.
"""
