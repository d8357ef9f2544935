# Stub of the `IPython` package: present so that mypy reads the modules stubbed beside it
# (see typings/README.md). Re-exports what `import IPython` gives that the package may use.
from IPython.core.getipython import get_ipython as get_ipython
from IPython.core.interactiveshell import InteractiveShell as InteractiveShell
from IPython.display import display as display

__version__: str
