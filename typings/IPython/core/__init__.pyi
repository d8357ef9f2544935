# Stub of the `IPython.core` package: present so that mypy reads `magic_arguments` and
# `display_functions` from here (see typings/README.md); the other modules of IPython.core
# are read from the installed IPython.
