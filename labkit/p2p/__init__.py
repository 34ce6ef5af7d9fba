"""GPU↔GPU copies (notebook 04): the peer-to-peer matrices, read against `nvidia-smi topo -m`, and what they diagnose.

- `matrices`: the four matrices (live or recorded), the topology's link labels, `P2PRun`, validation;
- `summaries`: one row per system, per link label, bidirectional ÷ unidirectional; notebook 04's results from them;
- `figures`: heatmaps annotated with link labels, peer access, systems side by side, the matrix explorer;
- `diagnosis`: plain-language findings (`diagnose`: a list of rules, and `doctor_findings` for `labkit doctor`);
  `wording`: how they say numbers, GPU pairs and likely causes;
- `read_write`: P2P reads against P2P writes in the shipped matrices;
- `placement`: tensor-parallel groups ranked by their worst link;
- `staging`: copies staged through host memory ("P2P off");
- `copy_engines`: nvbandwidth's copy-engine vs SM-copy testcases, recorded, side by side;
- `measure`: the matrices measured on this machine's GPUs; `bench_p2p`: `labkit bench p2p` / record.
"""
