"""The task cards (ipywidgets): one worker's card (`task_card`), a cell's box of cards
(`card_box`), a team's box of cards under its roster (`team_box`), an approval's prompt
(`approval_prompt`), shared styles (`widget_parts`) and the hub that coalesces their updates
(`hub`).

May import: render, parents and the runtime's facade.
"""
