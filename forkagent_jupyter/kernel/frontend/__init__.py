"""What the notebook sends to the JupyterLab extension: the task rows (`rows`), notifications
and the parent's answers (`answers`) and their cells and bundles (`delivery`).

May import: host, cards, comm, render, parents and the runtime's facade.
"""
