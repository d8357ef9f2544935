"""Run by a test kernel at start (PYTHONSTARTUP): the loop guard for the kernel's life.

See tests/loop_guard.py; the `kernel` fixture reads the findings before it shuts the kernel down.
"""

__import__("tests.loop_guard", fromlist=["install"]).install()
