"""The hierarchy cliff (notebook 06): every level data moves through, and all-reduce across a slow link.

- `ladder`: each level's rate against size — GPU memory, GPU↔GPU, host↔GPU, host memory, processes —
  measured here and recorded; `rungs`: one number per level, the ratio at each boundary (and the interview);
- `hierarchical`: the hierarchical all-reduce by hand (intra reduce-scatter → inter all-reduce →
  intra all-gather), counting bytes per link; `worker`: one rank of its benchmark (labkit.launch or torchrun);
- `comparison`: hierarchical vs flat ring over a slow link, measured; `slowlink`: that link (network
  namespaces and tc); `torchrun`: the same across machines;
- the cluster-scale model (NCCL's algorithms on many nodes, tensor-parallel placement) is `labkit.cluster`;
- `bench_ladder`: `labkit bench ladder` and its part of `labkit record`.
"""
