"""The tools: the `labkit` command line and what it drives, on top of the core modules and the topics.

cli (the parser and main), commands (what each subcommand does), flags (checks of what the user typed),
benches (the experiments `labkit bench` and `labkit record` run), record, compare (with compare_inputs,
compare_groups, compare_figures), student, soak, notebooks, doctor. Two more tools still live beside the
topics, labkit/site and labkit/explain (scripts/module_map.py lists them in TOOLS_OUTSIDE_TOOLS).
"""
