"""All-reduce by hand (notebook 05): a ring simulated step by step, then written on torch.distributed and timed.

- `simulation`: N ranks in numpy, every transfer recorded (the schedule of labkit.collectives);
- `ring`: hand-written all-reduces on point-to-point messages — ring (textbook and pipelined), naive,
  binomial tree, recursive doubling — and the library's, by name (`IMPLEMENTATIONS`);
- `schedules`: every algorithm's messages round by round, costed (α-β) and counted in bytes, any N;
- `protocols`: NCCL's LL / LL128 / Simple and ring / tree / NVLS in recorded numbers (the small-message regime);
- `others`: reduce-scatter, all-gather, all-to-all, broadcast by hand, checked against the library;
- `correctness`: each checked against `dist.all_reduce` inside the ranks;
- `measure`: timed on local ranks (gloo, or NCCL on GPUs) with nccl-tests' algbw and busbw; notebook 05's results;
- `views`: the stepper, bytes per rank, measured vs modelled, recorded sweeps, the cost calculator;
- `perf`: the seven torch.distributed collectives swept like nccl-tests' `*_perf`, with a real #wrong check;
- `perf_table`: nccl-tests' table of such a sweep (what labkit.logs reads back);
- `bench_allreduce`: `labkit bench allreduce` and its part of `labkit record` (under torchrun: dist.all_reduce);
- `bench_collectives`: `labkit bench collectives`, on local ranks or under torchrun across machines.
"""
