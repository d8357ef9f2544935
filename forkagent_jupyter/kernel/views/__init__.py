"""What a cell shows besides cards: a parent turn streamed (`turns`), a batch (`batch_view`),
workers' memory (`memory_view`) and the timeline (`timeline_view`, `timeline_canvas`).

May import: render, interpolation, said and the runtime's facade.
"""
