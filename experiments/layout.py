"""The file names of a search dir and of a promote dir, in one place: the driver, the commands, the
report and the progress lines all read them. Names only: this module must import nothing of ours.
"""

JOURNAL = "journal.jsonl"  # a search's state (evolution/journal.py)
CONFIG = "search_config.json"  # a search's settings, compared on a rerun
RESULTS = "results.csv"
BEST = "best_genotype.json"
RESULT_FILES = (JOURNAL, CONFIG, RESULTS, BEST)  # what --upload_to keeps a copy of
CHECKPOINTS = "checkpoints"  # a multi-fidelity trial's state after its last rung, until it ends

PLAN = "promote_plan.json"  # a promote's settings and models
RESULT = "result.json"  # a promoted model's result, in its model dir
