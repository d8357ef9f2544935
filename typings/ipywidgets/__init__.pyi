# `ipywidgets` (untyped): the widgets the kernel's cards are built of, with the traits and
# methods the package uses (see typings/README.md).
from ipywidgets.widgets import Accordion as Accordion
from ipywidgets.widgets import Box as Box
from ipywidgets.widgets import Button as Button
from ipywidgets.widgets import ButtonStyle as ButtonStyle
from ipywidgets.widgets import DOMWidget as DOMWidget
from ipywidgets.widgets import HBox as HBox
from ipywidgets.widgets import Layout as Layout
from ipywidgets.widgets import Output as Output
from ipywidgets.widgets import Style as Style
from ipywidgets.widgets import VBox as VBox
from ipywidgets.widgets import Widget as Widget
from ipywidgets.widgets.widget_string import HTML as HTML
from ipywidgets.widgets.widget_string import HTMLStyle as HTMLStyle
from ipywidgets.widgets.widget_string import Text as Text

__version__: str
