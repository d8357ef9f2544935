"""The Jupyter side, thin: it shows the runtime and passes the person's words to it; it holds
no agent logic and imports the runtime only through its facade (`forkagent_jupyter.runtime`).

    extension   `%load_ext`: the agent of a kernel (`KernelAgent`), the magics, the comm
    core        the kernel's session, its settings and stopping a task
    ui          what the notebook shows of the session: cards, rows, answers, approvals
    host        the small types the views use of the kernel
    api         `forkagent_jupyter.kernel.api`: the same as the magics, from code
    headless    `forkagent demo`: the example notebook run headless in a real kernel
    settings    `%config ForkAgent.*`, each checked when assigned
    said, parents, interpolation   one line per refusal; a cell's parent; `{var}` in a line
    magics/ cards/ views/ render/ comm/ frontend/ approvals/   (each says what it holds)

Floors, lowest first: said, parents, interpolation, settings, render, comm; cards, views;
host; frontend; approvals; ui; core; magics; extension; api (tests/test_layering.py).
"""
