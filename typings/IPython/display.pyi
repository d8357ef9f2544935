# `IPython.display`: the names the package takes from it (see typings/README.md).
from IPython.core.display_functions import DisplayHandle as DisplayHandle
from IPython.core.display_functions import clear_output as clear_output
from IPython.core.display_functions import display as display
from IPython.core.display_functions import update_display as update_display
