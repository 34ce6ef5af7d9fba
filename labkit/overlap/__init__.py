"""Copy and compute at once (notebook 03): timelines, streams, overlap efficiency, a double-buffered loader.

- `timelines`: `Span`/`Timeline`, overlap efficiency, the loader's schedule as a model, tables of a run;
- `streams`: CUDA stream, host worker thread and calling thread behind one interface; `double_buffered`;
- `measure`: overlap measured on host threads (any CPU) and on CUDA streams (a GPU);
- `recorded`: recorded GPU runs, full-duplex points, and the link sweep a model is fitted to;
- `figures`: Gantt charts, full duplex, efficiency against the compute/copy ratio;
- `lesson`: what notebook 03 shows, section by section, as results `Session.present` shows and records;
- `bench_overlap`: `labkit bench overlap` and its part of `labkit record`.
"""
