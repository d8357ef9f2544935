"""One turn of one conversation: the tool-use loop (`loop`), its configuration (`config`),
compaction (`compaction`), thinking (`thinking`), a fork's messages and the recursion guard
(`fork`), and a prompt's size and cost next to the conversation it joins (`prompt_size`).

May import: permissions, config, tools, model, and the leaves. Imported by: workers, batch,
session.
"""
