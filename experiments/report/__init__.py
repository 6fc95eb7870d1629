"""The report: `amoeba report` writes one HTML page of a search and its promote.

- driver.py: the page (tables, verdict, figures); report_figures.py: the figures as inline SVG;
  cell_graph.py: a cell drawn by Graphviz (also `amoeba show --format=svg`).

Reads what the earlier steps wrote (it may import experiments.search, experiments.promote and
experiments.tracking); must not train, search or talk to Ray, and must not import
experiments.simulate or the command line (experiments.cli, experiments.commands, experiments.api).
"""
