"""One turn of one conversation: the tool-use loop (`loop`), its configuration (`config`),
compaction (`compaction`), thinking (`thinking`), and a fork's messages and the recursion
guard (`fork`).

May import: permissions, config, tools, model, and the leaves. Imported by: workers, batch,
session.
"""
