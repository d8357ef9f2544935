"""A worker's code is the model's, so it is attacked here as an attacker would: from inside a
real worker process of a real kernel. It must not run code in the kernel (no pickle on the
way back, no pull that unpickles unasked, no connection file or signing key) and must not
obtain the API key (not from the kernel's /proc entries, inherited objects, its own
environment or memory)."""

from __future__ import annotations

import pytest

from .conftest import Kernel
from .test_compute import SESSION, setup, status

pytestmark = pytest.mark.kernel

# a value that, unpickled, rebinds the user's `x` in the kernel
EVIL = (
    "evil = type('E', (), {'__reduce__': lambda s: "
    "(exec, ('import __main__; __main__.x = 666',))})()"
)


def test_a_pickle_frame_on_the_workers_socket_runs_nothing_in_the_kernel(kernel: Kernel) -> None:
    setup(kernel)
    kernel.execute("x = 1")
    probe = (
        f"import gc, pickle, struct; {EVIL}; "
        "sock = [o for o in gc.get_objects() if type(o).__name__ == '_Worker'][0].conn.sock; "
        "blob = pickle.dumps(('output', evil)); "
        "sock.sendall(struct.pack('!I', len(blob)) + blob)"
    )
    kernel.execute(f"%fork --name frame inject `py: {probe}`")
    kernel.run_approving("%tasks --wait frame", timeout=60)
    assert kernel.value("x") == 1
    # the worker that spoke out of protocol is ended, and its task says why
    assert status(kernel, "frame") == "failed"
    error = kernel.value(f"{SESSION}.registry.get('frame').error")
    assert "sent what is not a message of the protocol" in error


def test_a_pull_decodes_data_and_refuses_objects_unless_trusted(kernel: Kernel) -> None:
    setup(kernel)
    kernel.execute("x = 1")
    kernel.execute(
        f"%fork --name w make `py: import pandas as pd, numpy as np; {EVIL}; "
        "frame = pd.DataFrame({'a': [1, 2], 'b': ['u', 'v']}); arr = np.arange(6.0); "
        "plain = {'k': (1, 2.5, None, b'raw')}`"
    )
    kernel.run_approving("%tasks --wait w", timeout=60)
    assert status(kernel, "w") == "completed"
    # data comes back without pickle
    pulled = kernel.execute("%tasks --pull w frame arr plain")
    assert pulled.status == "ok", pulled.texts()
    assert kernel.value("frame.to_dict('list')") == {"a": [1, 2], "b": ["u", "v"]}
    assert kernel.value("arr.tolist()") == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    assert kernel.value("plain") == {"k": (1, 2.5, None, b"raw")}
    # an object whose unpickling runs code is refused, with one line saying why
    refused = kernel.execute("%tasks --pull w evil")
    assert refused.reply["content"]["ename"] == "UsageError"
    message = refused.reply["content"]["evalue"]
    assert "unpickling it would run code the worker chose in your kernel" in message
    assert "--trust" in message
    assert kernel.value("x") == 1
    assert kernel.execute("await api.pull('w', 'evil')").status == "error"
    assert kernel.value("x") == 1
    # the person may still say so
    trusted = kernel.execute("%tasks --pull --trust w evil")
    assert trusted.status == "ok", trusted.texts()
    assert kernel.value("x") == 666
