"""The tools: the `labkit` command line and what it drives, on top of the core modules and the topics.

cli (the parser and main), commands (what each subcommand does), flags (checks of what the user typed),
benches (the experiments `labkit bench` and `labkit record` run), record, compare (with compare_inputs,
compare_groups, compare_figures), student, soak, notebooks, doctor; and two packages: site (`labkit site`, the
course website) and explain (`labkit explain`, "is my number normal?" for an nccl-tests log).
"""
